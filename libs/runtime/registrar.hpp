// Keeps this service in the scheduler's roster: registers at start, sends a
// heartbeat every second, and registers again whenever the scheduler says it
// does not know the node (e.g. after the scheduler restarted). Owns one
// DEALER on its own thread; start/stop from the main thread.
#pragma once

#include "libs/runtime/service.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace loom::runtime {

class registrar {
 public:
  explicit registrar(service_env& env);
  ~registrar();  // stops and joins (bounded by one call timeout, 500 ms)

  bool registered() const { return registered_.load(); }
  void stop();

 private:
  void run();

  service_env& env_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> registered_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace loom::runtime
