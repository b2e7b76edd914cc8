// key_follower: on a cloud split over hosts (`loom up --only`, issue 26 item
// 2), a cloud service on a host without the scheduler cannot read the
// keys/sites files the scheduler writes. This asks the scheduler for the
// enrolled sites' keys (SiteKeysRequest) every half second over its own
// DEALER and thread, writes them to this host's keys/sites (site_keys.hpp)
// and refreshes the process's admission when they changed: an enrolled site
// is admitted, and a revoked one refused on its open connections too, within
// a second. While the scheduler cannot be reached the last keys stay in force
// (a cut inside the cloud must not lock every site out); that is logged once
// per distinct error. service_main starts one where follows() says so.
#pragma once

#include "libs/runtime/service.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace loom::runtime {

class key_follower {
 public:
  static constexpr std::chrono::milliseconds period{500};

  // Whether a process of `env` follows the scheduler's keys: a cloud service
  // other than the scheduler, on a host that does not run the scheduler; and
  // every cloud process, the scheduler replica included, on a host running
  // one replica of several on separate hosts (`--scheduler-replica K`).
  static bool follows(const service_env& env);

  explicit key_follower(service_env& env);
  ~key_follower();  // stops and joins (bounded by one call timeout)

  // How many replies were written so far (tests wait on it).
  std::uint64_t synced() const { return synced_.load(); }

 private:
  void run();

  service_env& env_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> synced_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace loom::runtime
