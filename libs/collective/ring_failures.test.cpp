#include "libs/collective/ring_test_util.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace loom;
using namespace loom::collective;
using namespace loom::collective::test;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

TEST_CASE("frames of an older generation are dropped while the new generation runs") {
  ring_fixture f(3);  // inboxes 0 and 1 form generation 2; inbox 2 is a stale member of generation 1
  std::atomic<bool> stale_started{false};
  status stale_result;
  std::thread stale([&] {
    auto g = f.join({2, 1}, 0, 1, 600ms);  // still pushes to inbox 1 as if generation 1 were current
    stale_started = true;
    std::vector<float> v(5000, 1.0f);
    stale_result = g ? (*g)->all_reduce_sum(v) : status(g.err());
  });
  while (!stale_started) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(150ms);  // its first frames reach inbox 1

  auto bufs = filled(2, 5000);
  std::uint64_t dropped = 0;
  check_all_ok(on_ring(f, {0, 1}, 2, [&](std::uint32_t r, group& g) {
    for (int call = 0; call < 3; ++call) {
      if (call > 0) bufs[r] = filled(2, 5000)[r];
      if (auto st = g.all_reduce_sum(bufs[r]); !st) return st;
    }
    if (r == 1) dropped = g.stale_frames_dropped();
    return ok_status();
  }));
  CHECK(wrong(bufs) == 0);
  CHECK(dropped > 0);
  stale.join();
  CHECK(stale_result.code() == errc::deadline_exceeded);
}

TEST_CASE("a newer generation's frames end the older group's call with conflict and reach the new group") {
  ring_fixture f(2);
  auto old_group = f.join({0, 1}, 1, 4, 20s);  // inbox 1, generation 4, waiting on rank 0
  REQUIRE(old_group.ok());
  auto bufs = filled(2, 3000);
  status rank0;
  std::thread t0([&] {
    auto g = f.join({0, 1}, 0, 5, 20s);
    rank0 = g ? (*g)->all_reduce_sum(bufs[0]) : status(g.err());
  });
  std::vector<float> v(3000, 1.0f);
  const auto t = clk::now();
  auto st = (*old_group)->all_reduce_sum(v);
  CHECK(clk::now() - t < 5s);
  CHECK(st.code() == errc::conflict);
  CHECK(st.err().message.find("generation 5") != std::string::npos);
  CHECK((*old_group)->all_reduce_sum(v).code() == errc::conflict);  // unusable from now on
  old_group = make_error(errc::internal, "destroyed");

  auto g1 = f.join({0, 1}, 1, 5, 20s);
  REQUIRE(g1.ok());
  auto st1 = (*g1)->all_reduce_sum(bufs[1]);
  t0.join();
  check_all_ok({rank0, st1});
  CHECK(wrong(bufs) == 0);
}

TEST_CASE("a member that never joins makes the others fail with deadline_exceeded naming it") {
  ring_fixture f(3);  // inbox 2 is bound but its member never joins
  const auto t = clk::now();
  std::vector<std::string> msgs(2);
  auto st = on_threads(2, [&](std::uint32_t r) -> status {
    auto g = f.join({0, 1, 2}, r, 7, 300ms);
    if (!g) return g.err();
    std::vector<float> v(100, 1.0f);
    auto s = (*g)->all_reduce_sum(v);
    if (!s) msgs[r] = s.err().message;
    return s;
  });
  const auto took = clk::now() - t;
  CHECK(st[0].code() == errc::deadline_exceeded);
  CHECK(st[1].code() == errc::deadline_exceeded);
  CHECK(msgs[0].find("rank 2 (" + f.inboxes[2]->endpoint() + ")") != std::string::npos);
  CHECK(took >= 300ms);
  CHECK(took < 3s);
}

TEST_CASE("setting stop ends a waiting call with unavailable promptly") {
  ring_fixture f(2);
  std::atomic<bool> stop{false};
  auto o = f.options({0, 1}, 0, 1, 60s);
  o.stop = &stop;
  auto g = group::join(f.ctx, f.keys[0], *f.inboxes[0], o);
  REQUIRE(g.ok());
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    stop = true;
  });
  std::vector<float> v(10, 1.0f);
  const auto t = clk::now();
  auto st = (*g)->all_reduce_sum(v);
  stopper.join();
  CHECK(st.code() == errc::unavailable);
  CHECK(st.err().message.find("stopped") != std::string::npos);
  CHECK(clk::now() - t < 1s);
}

TEST_CASE("members reducing different sizes fail with conflict naming both sides") {
  ring_fixture f(2);
  std::vector<std::vector<float>> bufs{std::vector<float>(12'345), std::vector<float>(12'344)};
  auto st = on_ring(
      f, first(2), 1, [&](std::uint32_t r, group& g) { return g.all_reduce_sum(bufs[r]); }, 1s);
  // Whoever reads the other's frame first reports the conflict and stops; the
  // other may then hear nothing more and time out.
  const std::string said[2] = {
      "rank 1 (" + f.inboxes[1]->endpoint() +
          ") sent call 1 of 12,344 floats; this rank (0) is at call 1 of 12,345 floats",
      "rank 0 (" + f.inboxes[0]->endpoint() +
          ") sent call 1 of 12,345 floats; this rank (1) is at call 1 of 12,344 floats"};
  int conflicts = 0;
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << (st[r].ok() ? std::string("ok") : st[r].err().to_string()));
    REQUIRE_FALSE(st[r].ok());
    CHECK((st[r].code() == errc::conflict || st[r].code() == errc::deadline_exceeded));
    if (st[r].code() != errc::conflict) continue;
    ++conflicts;
    CHECK(st[r].err().message.find(said[r]) != std::string::npos);
  }
  CHECK(conflicts >= 1);
}

TEST_CASE("a frame of the right generation but another call number is a conflict naming both calls") {
  ring_fixture f(2);
  auto g = f.join(first(2), 0, 3);
  REQUIRE(g.ok());
  auto rogue = raw_push(f, 1, 0);  // presents rank 1's key to rank 0's inbox
  std::vector<unsigned char> frame(frame_header_bytes + 4);
  frame_header h;
  h.sender = 1;
  h.world = 2;
  h.generation = 3;
  h.call = 7;
  h.chunk = 1;
  h.offset = 6'173;
  h.count = 1;
  h.total = 12'345;
  encode_header(h, frame.data());
  REQUIRE(rogue->send(zmq::buffer(frame)));
  std::vector<float> v(12'345);
  auto st = (*g)->all_reduce_sum(v);
  REQUIRE(st.code() == errc::conflict);
  CHECK(st.err().message.find("sent call 7 of 12,345 floats; this rank (0) is at call 1 of 12,345 floats") !=
        std::string::npos);
}

TEST_CASE("a short frame and a frame with a bad magic are corruption naming the inbox") {
  for (const std::string& bytes : {std::string("hello"), std::string(80, 'x')}) {
    ring_fixture f(2);
    auto g = f.join(first(2), 0, 1);
    REQUIRE(g.ok());
    auto rogue = raw_push(f, 1, 0);
    REQUIRE(rogue->send(zmq::buffer(bytes)));
    std::vector<float> v(10);
    auto st = (*g)->all_reduce_sum(v);
    REQUIRE(st.code() == errc::corruption);
    CHECK(st.err().message.find(f.inboxes[0]->endpoint()) != std::string::npos);
    CHECK(st.err().message.find(bytes.size() < 64 ? "short" : "magic") != std::string::npos);
  }
}

TEST_CASE("invalid group options are refused with invalid_argument") {
  ring_fixture f(3);
  auto refused = [&](group_options o, std::size_t me = 0) {
    auto g = group::join(f.ctx, f.keys[me], *f.inboxes[me], std::move(o));
    return !g.ok() && g.code() == errc::invalid_argument;
  };
  auto o = f.options(first(3), 0, 1);
  o.rank = 3;
  CHECK(refused(o));
  o = f.options(first(3), 0, 1);
  o.world = 2;  // three members
  CHECK(refused(o));
  o = f.options(first(3), 0, 1);
  o.world = 0;
  o.members.clear();
  CHECK(refused(o));
  o = f.options(first(3), 0, 1);
  o.members[1].public_key = "not-a-key";
  CHECK(refused(o));
  o = f.options({1, 0, 2}, 0, 1);  // rank 0 is inbox 1's member, not this inbox's
  CHECK(refused(o));
  CHECK_FALSE(refused(f.options(first(3), 0, 1)));
}

TEST_CASE("a peer whose key ZAP does not admit makes the call fail by timeout rather than hang") {
  ring_fixture f(1, 1);  // inbox 1's key is not on the allow list
  const auto t = clk::now();
  auto st = on_ring(
      f, first(2), 1,
      [&](std::uint32_t, group& g) {
        std::vector<float> v(100'000, 1.0f);
        return g.all_reduce_sum(v);
      },
      300ms);
  CHECK(st[0].code() == errc::deadline_exceeded);
  CHECK(st[1].code() == errc::deadline_exceeded);
  CHECK(clk::now() - t < 3s);
  CHECK(f.zap->rejected() > 0);
}
