#include "libs/collective/ring_test_util.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace loom;
using namespace loom::collective;
using namespace loom::collective::test;
using namespace std::chrono_literals;

TEST_CASE("two, three and four members all end with the exact sum in identical bytes") {
  for (std::uint32_t w : {2u, 3u, 4u}) {
    ring_fixture f(w);
    auto bufs = filled(w, 1003);
    check_all_ok(on_ring(f, first(w), 1, [&](std::uint32_t r, group& g) {
      CHECK(g.rank() == r);
      CHECK(g.world() == w);
      return g.all_reduce_sum(bufs[r]);
    }));
    INFO("world " << w);
    CHECK(wrong(bufs) == 0);
  }
}

TEST_CASE(
    "random floats reduce to the same bits on every member and in a rerun, in the documented ring order") {
  const std::uint32_t w = 3;
  const std::size_t n = 100'003;
  std::mt19937 rng(20240601);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> x(w, std::vector<float>(n));
  for (auto& b : x)
    for (std::size_t i = 0; i < n; ++i) b[i] = u(rng) * std::pow(10.0f, static_cast<float>(i % 7) - 3.0f);

  ring_fixture f(w);
  auto run = [&](std::uint64_t gen) {
    auto bufs = x;
    check_all_ok(
        on_ring(f, first(w), gen, [&](std::uint32_t r, group& g) { return g.all_reduce_sum(bufs[r]); }));
    return bufs;
  };
  const auto a = run(1), b = run(2);
  for (std::uint32_t r = 0; r < w; ++r) {
    CHECK(std::memcmp(a[r].data(), a[0].data(), n * sizeof(float)) == 0);
    CHECK(std::memcmp(b[r].data(), a[0].data(), n * sizeof(float)) == 0);
  }
  // Chunk c is ((x_c + x_{c+1}) + x_{c+2}): its own rank first, then round the ring.
  std::size_t off_order = 0, naive_differs = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t c = i < 33'335 ? 0 : i < 66'669 ? 1 : 2;  // 100'003 = 33'335 + 33'334 + 33'334
    const float want = (x[c][i] + x[(c + 1) % w][i]) + x[(c + 2) % w][i];
    const float naive = (x[0][i] + x[1][i]) + x[2][i];
    off_order += std::memcmp(&want, &a[0][i], sizeof want) != 0;
    naive_differs += std::memcmp(&naive, &a[0][i], sizeof naive) != 0;
  }
  CHECK(off_order == 0);
  CHECK(naive_differs > 0);  // the order matters for these data, so the check above can fail
}

TEST_CASE("sizes 0, 1, below the world size and not divisible by it reduce correctly") {
  const std::uint32_t w = 4;
  ring_fixture f(w);
  for (std::size_t n : {0, 1, 2, 3, 5, 4097}) {
    auto bufs = filled(w, n);
    check_all_ok(
        on_ring(f, first(w), n + 1, [&](std::uint32_t r, group& g) { return g.all_reduce_sum(bufs[r]); }));
    INFO("size " << n);
    CHECK(wrong(bufs) == 0);
  }
}

TEST_CASE("each member sends 2(W-1)/W of the buffer plus one 64-byte header per frame") {
  const std::uint32_t w = 4;
  ring_fixture f(w);
  auto bufs = filled(w, 4000);
  std::vector<std::uint64_t> sent(w);
  check_all_ok(on_ring(f, first(w), 1, [&](std::uint32_t r, group& g) {
    auto st = g.all_reduce_sum(bufs[r]);
    sent[r] = g.bytes_sent();
    return st;
  }));
  for (auto s : sent) CHECK(s == 6 * frame_header_bytes + 6 * 1000 * sizeof(float));
}

TEST_CASE("a buffer of 8 Mi floats reduces exactly through segmented frames") {
  const std::uint32_t w = 3;
  const std::size_t n = std::size_t{8} << 20;
  ring_fixture f(w);
  auto bufs = filled(w, n);
  check_all_ok(on_ring(f, first(w), 1, [&](std::uint32_t r, group& g) { return g.all_reduce_sum(bufs[r]); }));
  CHECK(wrong(bufs) == 0);
}

TEST_CASE("two hundred consecutive calls of varying sizes all sum correctly") {
  const std::uint32_t w = 3;
  ring_fixture f(w);
  std::vector<std::size_t> bad(w);
  check_all_ok(on_ring(f, first(w), 1, [&](std::uint32_t r, group& g) {
    for (std::size_t call = 0; call < 200; ++call) {
      const std::size_t n = (call * 37) % 101;
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = value(r, i + call);
      if (auto st = g.all_reduce_sum(v); !st) return st;
      for (std::size_t i = 0; i < n; ++i)
        bad[r] += v[i] != value(0, i + call) + value(1, i + call) + value(2, i + call);
    }
    return ok_status();
  }));
  for (auto b : bad) CHECK(b == 0);
}

TEST_CASE("a world of one is a no-op without sockets") {
  ring_fixture f(1);
  auto g = f.join(first(1), 0, 1);
  REQUIRE(g.ok());
  std::vector<float> v{1.5f, -2.0f};
  CHECK((*g)->all_reduce_sum(v).ok());
  CHECK(v == std::vector<float>{1.5f, -2.0f});
  CHECK((*g)->bytes_sent() == 0);
}
