// leadership: one replica of a replicated service (the scheduler) leads at a
// time (issue 30). A thread of its own, on a connection of its own, holds the
// service's lease in the shared store (libs/store/lease.hpp):
//   * leading: renews every `renew`; a renewal refused (deposed) steps down at
//     once; a store it cannot reach steps down when the lease it last renewed
//     would have run out by its own clock (counted from when that renewal was
//     sent, so never later than the store's expiry).
//   * standing by: reads the lease every `poll` and takes it once it has run
//     out (epoch + 1).
// The process's write fence follows: the epoch while leading, 0 otherwise,
// set before leading() turns true and after it turns false. Stopping (the
// destructor) releases a held lease so a standby takes over at once.
// Thread-safe.
#pragma once

#include "libs/status/status.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace loom::store {
class database;
}

namespace loom::runtime {

struct leadership_options {
  std::string service;   // the lease's name: "scheduler"
  std::string node_id;   // "scheduler-2@host"
  std::string endpoint;  // this replica's advertised rpc endpoint
  std::string zone;
  std::string database_url;
  std::chrono::milliseconds ttl{250};
  std::chrono::milliseconds renew{60};
  std::chrono::milliseconds poll{20};
};

// ttl from $LOOM_LEASE_TTL_MS (50 .. 60000, default 250), renew ttl/4, poll ttl/12 (at least 5 ms).
leadership_options lease_timing_from_env(leadership_options o);

class leadership {
 public:
  struct view {
    bool leading = false;
    std::int64_t epoch = 0;  // the lease's, as last seen
    std::string leader, leader_endpoint;
    std::int64_t lease_left_ms = 0;
    std::int64_t view_age_ms = 0;  // since the last good read or renewal
    std::uint64_t takeovers = 0;
    std::string last_error;
  };

  // Opens the lease's own connection (unfenced), makes the lease table,
  // installs the process's write fence (epoch 0) and starts the thread.
  // on_change(leading, epoch) is called from that thread after each change.
  static result<std::unique_ptr<leadership>> start(leadership_options o,
                                                   std::function<void(bool, std::int64_t)> on_change);
  ~leadership();

  bool leading() const { return leading_.load(); }
  // This replica's epoch while it leads, else 0.
  std::int64_t epoch() const { return leading_ ? epoch_.load() : 0; }
  view snapshot() const;
  const leadership_options& options() const { return o_; }
  // The lease's holder name for this incarnation (node id + '#' + random).
  const std::string& holder() const { return holder_; }

 private:
  leadership(leadership_options o, std::unique_ptr<store::database> db, std::function<void(bool, std::int64_t)> cb);
  void run();
  void step_down(const std::string& why);

  leadership_options o_;
  std::string holder_;
  std::unique_ptr<store::database> db_;
  std::function<void(bool, std::int64_t)> on_change_;
  std::atomic<bool> leading_{false};
  std::atomic<std::int64_t> epoch_{0};
  mutable std::mutex mu_;  // guards view_ and stop_
  view view_;
  std::chrono::steady_clock::time_point seen_{};
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace loom::runtime
