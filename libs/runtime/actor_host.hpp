// loom::runtime::actor_host: runs one service's logic in a supervised actor.
// It owns a CAF actor system (CAF stays behind this pimpl) with a one_for_one
// supervisor and one service actor holding the service_logic:
//
//   post() --> supervisor --(in order)--> service actor --> logic.handle()
//                  |  crash: restart with backoff, calls queued meanwhile
//                  |  > max_restarts crashes in window: escalate (gives up)
//
//   running --crash--> backoff --timer--> running (new logic from the factory)
//      |                  |
//      |      too many crashes in window --> escalated (posts -> unavailable)
//      +--stop()--> stopped (posts -> unavailable)
//
// Every public member is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "libs/runtime/service_logic.hpp"

namespace loom::runtime {

class actor_host {
 public:
  struct options {
    int threads = 2;          // scheduler threads; services are small, the box has 2 cores
    int max_restarts = 5;     // restart intensity: more than this many crashes ...
    std::chrono::milliseconds window{60000};  // ... within this window escalates
    std::chrono::milliseconds backoff_initial{50};  // first restart is quick: most crashes are one-offs
    std::chrono::milliseconds backoff_max{5000};    // a flapping dependency is retried at least every 5 s
    std::chrono::milliseconds tick{1000};  // period of service_logic::on_tick; <= 0 disables ticks
  };
  // Makes a fresh logic; called on start and after each crash (e.g. the
  // trainer's restores from its latest checkpoint). Runs on an actor thread;
  // throwing or returning null counts as a crash.
  using factory = std::function<std::unique_ptr<service_logic>()>;
  using done_fn = std::function<void(handled)>;
  using restart_fn = std::function<void(std::uint64_t restarts, std::string reason)>;

  // Starts the actor system, the supervisor and the first service actor.
  actor_host(factory make_logic, options opts);
  ~actor_host();  // stop()
  actor_host(const actor_host&) = delete;
  actor_host& operator=(const actor_host&) = delete;

  // Posts a call. `done` runs exactly once:
  //  * with the logic's answer, on an actor thread;
  //  * with errc::unavailable if the service actor crashed while handling this
  //    call (on an actor thread), if the host has escalated or is stopped (on
  //    the calling thread), or if stop() drops the call (inside stop()).
  // Calls posted while the service actor is restarting wait in the supervisor
  // and go to the new actor in order; so do calls still queued at a crash.
  // `done` must not call stop() (stop waits for the actor thread it runs on).
  void post(std::string type, std::string body, call_context ctx, done_fn done);

  // Restarts performed so far.
  std::uint64_t restarts() const;
  // True once the supervisor gave up (restart intensity exceeded).
  bool escalated() const;
  // Called on an actor thread after each restart with the new restart count
  // and the rendered crash reason (for metrics and logs). Must not throw.
  void set_on_restart(restart_fn fn);

  // Shuts the supervisor and service actor down and destroys the actor system.
  // Returns within ~2 s provided handle()/on_tick() calls are short: a call
  // being handled is finished, calls still queued are answered unavailable.
  // Idempotent. Not from inside a done/on_restart callback.
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace loom::runtime
