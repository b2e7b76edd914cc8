#include "libs/runtime/actor_host.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace loom::runtime;
using loom::errc;
using namespace std::chrono_literals;

namespace {

// Real-time bounds are generous: the box has 2 cores shared with other builds.
constexpr auto patience = 5s;

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = patience) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Collects the answers of posted calls, in arrival order. Must outlive the host.
class replies {
 public:
  actor_host::done_fn sink() {
    return [this](handled h) {
      std::lock_guard lock{mu_};
      got_.push_back(std::move(h));
      cv_.notify_all();
    };
  }
  bool wait_for(std::size_t n) {
    std::unique_lock lock{mu_};
    return cv_.wait_for(lock, patience, [&] { return got_.size() >= n; });
  }
  std::vector<handled> all() {
    std::lock_guard lock{mu_};
    return got_;
  }
  handled at(std::size_t i) { return all().at(i); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<handled> got_;
};

// Test logic. "echo" returns its body; "count" returns how many calls this
// instance has seen and which instance (generation) it is; "crash" throws;
// "sleep" blocks for <body> ms.
struct probe {
  std::atomic<int> made{0};
  std::atomic<int> ticks{0};
  std::atomic<bool> sleeping{false};
  bool first_tick_throws = false;
};

class test_logic : public service_logic {
 public:
  test_logic(probe& p, int generation) : p_(p), gen_(generation) {}
  handled handle(const std::string& type, const std::string& body, const call_context& ctx) override {
    ++calls_;
    if (type == "crash") throw std::runtime_error("crash on request");
    if (type == "sleep") {
      p_.sleeping = true;
      std::this_thread::sleep_for(std::chrono::milliseconds{std::stoi(body)});
    }
    if (type == "count")
      return {errc::ok, {}, "count", "gen=" + std::to_string(gen_) + " calls=" + std::to_string(calls_), {}, {}, {}};
    return {errc::ok, {}, type, body + " from " + ctx.principal, {}, {}, {}};
  }
  void on_tick() override {
    ++p_.ticks;
    if (p_.first_tick_throws && gen_ == 1) throw std::runtime_error("tick failed");
  }

 private:
  probe& p_;
  int gen_;
  int calls_ = 0;
};

actor_host::factory make_factory(probe& p) {
  return [&p] { return std::make_unique<test_logic>(p, ++p.made); };
}

actor_host::options fast_options() {
  actor_host::options o;
  o.backoff_initial = 10ms;
  o.backoff_max = 40ms;
  o.tick = 0ms;  // off unless a test wants ticks
  return o;
}

call_context alice() { return {"req-1", "alice", "operator", "zone-a"}; }

}  // namespace

TEST_CASE("an echo call round-trips through post with its context") {
  probe p;
  replies r;
  actor_host host{make_factory(p), fast_options()};
  host.post("echo", "hello", alice(), r.sink());
  REQUIRE(r.wait_for(1));
  auto h = r.at(0);
  CHECK(h.code == errc::ok);
  CHECK(h.type == "echo");
  CHECK(h.body == "hello from alice");
  CHECK(host.restarts() == 0);
  CHECK(p.made == 1);
}

TEST_CASE("a logic that throws is recreated by the factory with fresh state") {
  probe p;
  replies r;
  actor_host host{make_factory(p), fast_options()};
  std::atomic<std::uint64_t> reported{0};
  std::string reason;
  std::mutex reason_mu;
  host.set_on_restart([&](std::uint64_t n, std::string why) {
    std::lock_guard lock{reason_mu};
    reason = std::move(why);
    reported = n;
  });
  host.post("count", "", alice(), r.sink());
  host.post("count", "", alice(), r.sink());
  REQUIRE(r.wait_for(2));
  CHECK(r.at(1).body == "gen=1 calls=2");
  host.post("crash", "", alice(), r.sink());
  REQUIRE(r.wait_for(3));
  CHECK(r.at(2).code == errc::unavailable);  // the call that crashed the actor
  REQUIRE(eventually([&] { return host.restarts() == 1; }));
  host.post("count", "", alice(), r.sink());
  REQUIRE(r.wait_for(4));
  CHECK(r.at(3).body == "gen=2 calls=1");
  CHECK(p.made == 2);
  CHECK(reported == 1);
  std::lock_guard lock{reason_mu};
  CHECK(reason.find("crash on request") != std::string::npos);
}

TEST_CASE("calls posted during the restart backoff are answered by the new logic in order") {
  probe p;
  replies r;
  auto o = fast_options();
  o.backoff_initial = 1000ms;  // wide enough that the posts below land inside it
  o.backoff_max = 1000ms;
  actor_host host{make_factory(p), o};
  const auto start = std::chrono::steady_clock::now();
  host.post("crash", "", alice(), r.sink());
  host.post("count", "", alice(), r.sink());  // queued behind the crash: never started, so kept
  REQUIRE(r.wait_for(1));  // the supervisor answers the crashed call, then starts the backoff
  CHECK(r.at(0).code == errc::unavailable);
  host.post("count", "", alice(), r.sink());
  REQUIRE(r.wait_for(3));
  CHECK(std::chrono::steady_clock::now() - start >= 900ms);
  CHECK(r.at(1).body == "gen=2 calls=1");
  CHECK(r.at(2).body == "gen=2 calls=2");
  CHECK(host.restarts() == 1);
  CHECK_FALSE(host.escalated());
}

TEST_CASE("more than max_restarts crashes in the window escalate and later calls are unavailable") {
  probe p;
  replies r;
  auto o = fast_options();
  o.max_restarts = 2;
  actor_host host{make_factory(p), o};
  for (int i = 0; i < 3; ++i) host.post("crash", "", alice(), r.sink());
  REQUIRE(r.wait_for(3));
  REQUIRE(eventually([&] { return host.escalated(); }));
  CHECK(host.restarts() == 2);
  CHECK(p.made == 3);
  host.post("echo", "late", alice(), r.sink());
  REQUIRE(r.wait_for(4));
  for (auto& h : r.all()) CHECK(h.code == errc::unavailable);
}

TEST_CASE("a factory that returns no logic counts as a crash") {
  replies r;
  auto o = fast_options();
  o.max_restarts = 1;
  std::atomic<int> calls{0};
  actor_host host{[&]() -> std::unique_ptr<service_logic> {
                    ++calls;
                    return nullptr;
                  },
                  o};
  REQUIRE(eventually([&] { return host.escalated(); }));
  CHECK(calls == 2);
  host.post("echo", "x", alice(), r.sink());
  REQUIRE(r.wait_for(1));
  CHECK(r.at(0).code == errc::unavailable);
}

TEST_CASE("on_tick runs every tick period") {
  probe p;
  auto o = fast_options();
  o.tick = 10ms;
  actor_host host{make_factory(p), o};
  CHECK(eventually([&] { return p.ticks >= 3; }));
}

TEST_CASE("a throwing on_tick crashes the logic and it is recreated") {
  probe p;
  p.first_tick_throws = true;
  auto o = fast_options();
  o.tick = 10ms;
  actor_host host{make_factory(p), o};
  REQUIRE(eventually([&] { return host.restarts() == 1; }));
  CHECK(eventually([&] { return p.ticks >= 3; }));  // generation 2 keeps ticking
  CHECK(p.made == 2);
  CHECK(host.restarts() == 1);
}

TEST_CASE("stop returns within two seconds while a call is being handled") {
  probe p;
  replies r;
  actor_host host{make_factory(p), fast_options()};
  host.post("sleep", "300", alice(), r.sink());
  for (int i = 0; i < 5; ++i) host.post("echo", "queued", alice(), r.sink());
  REQUIRE(eventually([&] { return p.sleeping.load(); }));
  const auto start = std::chrono::steady_clock::now();
  host.stop();
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  auto got = r.all();  // every call answered exactly once by the time stop() returns
  REQUIRE(got.size() == 6);
  CHECK(got[0].code == errc::ok);  // the running call finishes
  for (std::size_t i = 1; i < got.size(); ++i) CHECK(got[i].code == errc::unavailable);
  host.post("echo", "after", alice(), r.sink());  // answered at once, on this thread
  REQUIRE(r.all().size() == 7);
  CHECK(r.at(6).code == errc::unavailable);
}

TEST_CASE("destroying the host with many pending calls does not hang") {
  probe p;
  replies r;
  const auto start = std::chrono::steady_clock::now();
  {
    actor_host host{make_factory(p), fast_options()};
    for (int i = 0; i < 200; ++i) host.post("sleep", "5", alice(), r.sink());
  }
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK(r.all().size() == 200);
}
