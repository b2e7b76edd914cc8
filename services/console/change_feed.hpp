// change_feed: the scheduler's change events (its PUB socket, on its data
// endpoint in endpoints.json), followed by one thread. Each event only names
// a topic ("roster", "jobs", "sites", "models"); it bumps a generation and
// wakes every live stream, which then asks the services what changed under
// its own session's token (live.hpp). So the console follows the services'
// own event streams instead of asking them on a timer, and an event can
// never show a browser more than its token may see.
// Thread-safe: one subscriber thread, any number of waiters.
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/wire/curve.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace zmq {
class context_t;
}

namespace loom::console {

class change_feed {
 public:
  // Subscribes as `mine` (the console's own key: the scheduler's event
  // socket admits this deployment's keys only). The scheduler's endpoint and
  // key come from `paths` (re-read until found).
  change_feed(zmq::context_t& ctx, layout::paths paths, wire::curve_keypair mine);
  ~change_feed();  // stops and joins within ~200 ms

  // Waits until the generation differs from `seen` or `timeout` passes;
  // returns the current generation.
  std::uint64_t wait(std::uint64_t seen, std::chrono::milliseconds timeout);
  std::uint64_t generation() const { return gen_.load(); }
  std::uint64_t events() const { return events_.load(); }

 private:
  void run();

  zmq::context_t& ctx_;
  layout::paths paths_;
  wire::curve_keypair mine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<std::uint64_t> gen_{0}, events_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace loom::console
