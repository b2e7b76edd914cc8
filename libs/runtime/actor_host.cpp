// actor_host: owns the CAF actor system; the actors are in supervisor.cpp.
#include "libs/runtime/actor_host.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <mutex>

#include "libs/runtime/supervisor.hpp"

namespace loom::runtime {

struct actor_host::impl {
  caf::actor_system_config cfg;  // must outlive `system`: declared first, destroyed last
  std::shared_ptr<detail::supervision> sv;
  std::mutex mu;  // guards the two members below against post() racing stop()
  std::unique_ptr<caf::actor_system> system;  // null once stopped
  caf::actor supervisor;                      // null once stopped
};

namespace {
void answer_unavailable(actor_host::done_fn& done, const char* why) {
  if (!done) return;
  handled h;
  h.code = errc::unavailable;
  h.message = why;
  done(std::move(h));
}
}  // namespace

actor_host::actor_host(factory make_logic, options opts) : impl_(std::make_unique<impl>()) {
  opts.threads = std::max(opts.threads, 1);
  impl_->sv = std::make_shared<detail::supervision>();
  impl_->sv->make_logic = std::move(make_logic);
  impl_->sv->opts = opts;
  impl_->cfg.set("scheduler.max-threads", static_cast<std::size_t>(opts.threads));
  impl_->system = std::make_unique<caf::actor_system>(impl_->cfg);
  impl_->supervisor = detail::spawn_supervisor(*impl_->system, impl_->sv);
}

actor_host::~actor_host() { stop(); }

void actor_host::post(std::string type, std::string body, call_context ctx, done_fn done) {
  if (impl_->sv->escalated.load()) return answer_unavailable(done, "service gave up after repeated crashes");
  auto call = std::make_shared<detail::pending_call>(std::move(type), std::move(body), std::move(ctx),
                                                     std::move(done));
  {
    std::lock_guard lock{impl_->mu};
    if (impl_->system) detail::send_call(impl_->supervisor, call);
  }
  // If the call was not sent, or was dropped because the supervisor escalated
  // meanwhile, this is the last reference: ~pending_call answers unavailable
  // here, outside the lock, so `done` may post() again.
  call.reset();
}

std::uint64_t actor_host::restarts() const { return impl_->sv->restarts.load(); }

bool actor_host::escalated() const { return impl_->sv->escalated.load(); }

void actor_host::set_on_restart(restart_fn fn) { impl_->sv->set_on_restart(std::move(fn)); }

void actor_host::stop() {
  std::unique_ptr<caf::actor_system> system;
  caf::actor supervisor;
  {
    std::lock_guard lock{impl_->mu};
    if (!impl_->system) return;
    system = std::move(impl_->system);
    supervisor = std::move(impl_->supervisor);
  }
  // Service actors answer their remaining calls unavailable instead of running them.
  impl_->sv->stopping.store(true);
  // The service actor dies through its link; ~actor_system waits for both.
  caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
  supervisor = nullptr;  // no handle may outlive the system
  system.reset();
}

}  // namespace loom::runtime
