// Internal to loom::runtime (used by actor_host.cpp only): the one_for_one
// supervisor actor and the service actor it restarts. CAF types are only
// forward-declared here; the actors themselves live in supervisor.cpp.
//
// Ownership: actor_host and the supervisor share one `supervision` block
// (shared_ptr); each posted call is a shared_ptr<pending_call> passed from
// actor to actor until it is answered.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "libs/runtime/actor_host.hpp"

namespace caf {
class actor;
class actor_system;
}  // namespace caf

namespace loom::runtime::detail {

// One posted call. answer() runs `done` at most once; the destructor answers
// errc::unavailable if nobody did, so a call dropped anywhere (a dead mailbox,
// shutdown) is still answered exactly once.
class pending_call {
 public:
  enum class phase : int { queued, started, answered };

  pending_call(std::string type, std::string body, call_context ctx, actor_host::done_fn done);
  ~pending_call();
  pending_call(const pending_call&) = delete;
  pending_call& operator=(const pending_call&) = delete;

  void answer(handled h);
  void fail(errc code, std::string message) { handled h;
    h.code = code;
    h.message = std::move(message);
    answer(std::move(h)); }
  // The service actor marks a call started just before handing it to the
  // logic; a call never started is safe to deliver again after a crash.
  void mark_started() { phase_.store(phase::started, std::memory_order_release); }
  phase state() const { return phase_.load(std::memory_order_acquire); }

  const std::string type;
  const std::string body;
  const call_context ctx;

 private:
  actor_host::done_fn done_;
  std::atomic<phase> phase_{phase::queued};
};

using call_ptr = std::shared_ptr<pending_call>;

// State shared by actor_host (any thread) and the actors.
struct supervision {
  actor_host::factory make_logic;
  actor_host::options opts;
  std::atomic<std::uint64_t> restarts{0};
  std::atomic<bool> escalated{false};
  std::atomic<bool> stopping{false};  // set by stop(): service actors stop calling the logic

  void set_on_restart(actor_host::restart_fn fn);
  void notify_restart(std::uint64_t n, const std::string& reason);

 private:
  std::mutex mu_;
  actor_host::restart_fn on_restart_;  // guarded by mu_
};

// Spawns the supervisor (which spawns the first service actor).
caf::actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<supervision> shared);
// Sends `call` to the supervisor; if the supervisor is gone, the call is answered unavailable.
void send_call(const caf::actor& supervisor, call_ptr call);

}  // namespace loom::runtime::detail
