// Test helpers shared by ring.test.cpp and ring_failures.test.cpp (the
// collective_tests binary only): a context with a ZAP handler and one inbox
// per generated key, members run as threads, integer-valued test data whose
// sums are exact in any order, and a raw PUSH for sending forged frames.
#pragma once

#include "libs/collective/frame.hpp"
#include "libs/collective/ring.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

namespace loom::collective::test {

using namespace std::chrono_literals;

// One context and ZAP handler (domain "loom") admitting `admitted` generated
// keys; one inbox per key, plus keys the handler does not admit. Members run
// as threads. Destruction order: inboxes, then the handler, then the context.
struct ring_fixture {
  zmq::context_t ctx;
  std::vector<wire::curve_keypair> keys;
  std::unique_ptr<wire::zap_handler> zap;
  std::vector<std::unique_ptr<inbox>> inboxes;

  explicit ring_fixture(std::size_t admitted, std::size_t strangers = 0) {
    wire::allow_list allowed;
    for (std::size_t i = 0; i < admitted + strangers; ++i) {
      keys.push_back(wire::generate_keypair());
      if (i < admitted) allowed[keys.back().public_z85] = "trainer-" + std::to_string(i);
    }
    zap = std::make_unique<wire::zap_handler>(ctx, allowed, "loom");
    for (const auto& k : keys) {
      auto in = inbox::bind(ctx, k, "loom", "tcp://127.0.0.1:*");
      REQUIRE(in.ok());
      inboxes.push_back(std::move(*in));
    }
  }

  // Options for the member at position `rank` of a ring through the inboxes `ring`.
  group_options options(const std::vector<std::size_t>& ring, std::uint32_t rank, std::uint64_t generation,
                        std::chrono::milliseconds timeout = 20s) const {
    group_options o;
    o.rank = rank;
    o.world = static_cast<std::uint32_t>(ring.size());
    for (std::size_t i : ring) o.members.push_back({inboxes[i]->endpoint(), inboxes[i]->public_key()});
    o.generation = generation;
    o.timeout = timeout;
    return o;
  }

  result<std::unique_ptr<group>> join(const std::vector<std::size_t>& ring, std::uint32_t rank,
                                      std::uint64_t gen, std::chrono::milliseconds timeout = 20s) {
    return group::join(ctx, keys[ring[rank]], *inboxes[ring[rank]], options(ring, rank, gen, timeout));
  }
};

inline std::vector<std::size_t> first(std::size_t w) {
  std::vector<std::size_t> r(w);
  for (std::size_t i = 0; i < w; ++i) r[i] = i;
  return r;
}

// Runs body(i) on n threads at once; each thread's status.
inline std::vector<status> on_threads(std::uint32_t n, const std::function<status(std::uint32_t)>& body) {
  std::vector<status> out(n);
  std::vector<std::thread> threads;
  for (std::uint32_t i = 0; i < n; ++i) threads.emplace_back([&, i] { out[i] = body(i); });
  for (auto& t : threads) t.join();
  return out;
}

// Runs body(rank, group) on one thread per member of `ring`, each in its own group.
inline std::vector<status> on_ring(ring_fixture& f, const std::vector<std::size_t>& ring, std::uint64_t gen,
                                   const std::function<status(std::uint32_t, group&)>& body,
                                   std::chrono::milliseconds timeout = 20s) {
  return on_threads(static_cast<std::uint32_t>(ring.size()), [&](std::uint32_t r) {
    auto g = f.join(ring, r, gen, timeout);
    return g ? body(r, **g) : status(g.err());
  });
}

// Integer-valued floats: every sum of a few of them is exact in any order.
inline float value(std::uint32_t rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 1000) - 500);
}

// How many elements of member buffers differ from the exact sum or from member 0's bytes.
inline std::size_t wrong(const std::vector<std::vector<float>>& bufs) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < bufs[0].size(); ++i) {
    float want = 0;
    for (std::uint32_t r = 0; r < bufs.size(); ++r) want += value(r, i);
    for (const auto& b : bufs) bad += std::memcmp(&b[i], &want, sizeof want) != 0;
  }
  return bad;
}

inline std::vector<std::vector<float>> filled(std::uint32_t world, std::size_t n) {
  std::vector<std::vector<float>> bufs(world, std::vector<float>(n));
  for (std::uint32_t r = 0; r < world; ++r)
    for (std::size_t i = 0; i < n; ++i) bufs[r][i] = value(r, i);
  return bufs;
}

inline void check_all_ok(const std::vector<status>& st) {
  for (std::size_t r = 0; r < st.size(); ++r) {
    INFO("rank " << r << ": " << (st[r].ok() ? std::string("ok") : st[r].err().to_string()));
    CHECK(st[r].ok());
  }
}

// A raw PUSH presenting key `k` to inbox `to` of the fixture.
inline std::unique_ptr<zmq::socket_t> raw_push(ring_fixture& f, std::size_t k, std::size_t to) {
  auto s = std::make_unique<zmq::socket_t>(f.ctx, zmq::socket_type::push);
  s->set(zmq::sockopt::linger, 0);
  wire::make_curve_client(*s, f.keys[k], f.inboxes[to]->public_key());
  s->connect(f.inboxes[to]->endpoint());
  return s;
}

}  // namespace loom::collective::test
