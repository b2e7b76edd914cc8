// The actors behind actor_host (CAF 0.17). Two behaviors:
//
//   supervisor  one_for_one over a single service actor: forwards calls,
//               restarts the child with backoff, escalates on intensity.
//   service     owns the service_logic; answers calls, ticks.
//
// Messages (all local; never serialized):
//   call_ptr      supervisor <- host: a call to forward; service <- supervisor: handle it
//   respawn_atom  supervisor -> self: the backoff delay has passed, start a new child
//   tick_atom     service -> self: run logic.on_tick() (every options.tick)
#include "libs/runtime/supervisor.hpp"

#include <caf/all.hpp>

#include <deque>
#include <exception>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "libs/retry/backoff.hpp"
#include "libs/runtime/restart_policy.hpp"

// A call carries a std::function and is only ever passed within one process.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(loom::runtime::detail::call_ptr)

namespace loom::runtime::detail {

// ---------------------------------------------------------------- pending_call, supervision

pending_call::pending_call(std::string t, std::string b, call_context c, actor_host::done_fn done)
    : type(std::move(t)), body(std::move(b)), ctx(std::move(c)), done_(std::move(done)) {}

pending_call::~pending_call() {
  if (state() != phase::answered) fail(errc::unavailable, "call dropped: service stopped or gave up");
}

void pending_call::answer(handled h) {
  // The atomic exchange makes a second answer (or the destructor's) a no-op.
  if (phase_.exchange(phase::answered, std::memory_order_acq_rel) == phase::answered) return;
  if (!done_) return;
  auto done = std::move(done_);
  try {
    done(std::move(h));
  } catch (...) {
    // A throwing callback must not crash the actor (or terminate from ~pending_call).
  }
}

void supervision::set_on_restart(actor_host::restart_fn fn) {
  std::lock_guard lock{mu_};
  on_restart_ = std::move(fn);
}

void supervision::notify_restart(std::uint64_t n, const std::string& reason) {
  actor_host::restart_fn fn;
  {
    std::lock_guard lock{mu_};
    fn = on_restart_;
  }
  if (fn) fn(n, reason);
}

namespace {

using tick_atom = caf::atom_constant<caf::atom("loom_tick")>;
using respawn_atom = caf::atom_constant<caf::atom("loom_respw")>;

// Turns an exception escaping a handler into the actor's exit reason (instead
// of CAF's default, which prints to stderr and loses the message).
caf::error exception_to_error(std::exception_ptr& eptr) {
  try {
    std::rethrow_exception(eptr);
  } catch (const std::exception& e) {
    return caf::make_error(caf::sec::runtime_error, std::string{"exception: "} + e.what());
  } catch (...) {
    return caf::make_error(caf::sec::runtime_error, "unknown exception");
  }
}

// ---------------------------------------------------------------- service actor

struct service_state {
  std::unique_ptr<service_logic> logic;
  static inline const char* name = "loom.service";
};

caf::behavior service(caf::stateful_actor<service_state>* self, std::shared_ptr<supervision> sv) {
  self->set_exception_handler([](std::exception_ptr& e) { return exception_to_error(e); });
  // Throwing here (or from the factory) crashes this actor like a throwing handler.
  self->state.logic = sv->make_logic();
  if (!self->state.logic) throw std::runtime_error("logic factory returned null");
  if (sv->opts.tick.count() > 0) self->delayed_send(self, sv->opts.tick, tick_atom::value);
  return {
      [self, sv](const call_ptr& c) {
        if (sv->stopping.load()) {
          c->fail(errc::unavailable, "service is stopping");
          return;
        }
        c->mark_started();
        c->answer(self->state.logic->handle(c->type, c->body, c->ctx));
      },
      [self, sv](tick_atom) {
        if (sv->stopping.load()) return;
        self->state.logic->on_tick();
        self->delayed_send(self, sv->opts.tick, tick_atom::value);
      },
  };
}

// ---------------------------------------------------------------- supervisor actor

struct supervisor_state {
  std::shared_ptr<supervision> sv;
  caf::actor child;                      // current service actor; null while in backoff
  std::set<caf::actor_addr> children;    // linked children whose exit_msg is still due
  std::deque<call_ptr> inflight;         // sent to `child`, maybe not yet answered (FIFO)
  std::deque<call_ptr> waiting;          // to send once a child runs again
  std::optional<restart_policy> policy;  // optional: CAF default-constructs the state
  std::optional<retry::backoff> delays;
  std::string last_reason;               // why the previous child died
  static inline const char* name = "loom.supervisor";
};

using supervisor_actor = caf::stateful_actor<supervisor_state>*;

void forward(supervisor_actor self, call_ptr c) {
  auto& st = self->state;
  // The child answers in order, so answered calls collect at the front.
  while (!st.inflight.empty() && st.inflight.front()->state() == pending_call::phase::answered)
    st.inflight.pop_front();
  st.inflight.push_back(c);
  self->send(st.child, std::move(c));
}

void start_child(supervisor_actor self) {
  auto& st = self->state;
  st.child = self->spawn<caf::monitored + caf::linked>(service, st.sv);
  st.children.insert(st.child.address());
  auto waiting = std::exchange(st.waiting, {});
  for (auto& c : waiting) forward(self, std::move(c));
}

// The current child died: keep calls it never started, answer the one it was
// handling, then restart after a backoff delay or escalate.
void on_child_down(supervisor_actor self, const caf::error& reason) {
  auto& st = self->state;
  st.child = nullptr;
  st.last_reason = self->system().render(reason);
  std::deque<call_ptr> not_started;
  for (auto& c : st.inflight) {
    if (c->state() == pending_call::phase::queued)
      not_started.push_back(std::move(c));
    else if (c->state() == pending_call::phase::started)
      c->fail(errc::unavailable, "service actor crashed while handling the call: " + st.last_reason);
  }
  st.inflight.clear();
  st.waiting.insert(st.waiting.begin(), not_started.begin(), not_started.end());
  auto now = restart_policy::clock::now();
  if (st.policy->on_crash(now) == restart_policy::verdict::escalate) {
    st.sv->escalated.store(true);
    for (auto& c : st.waiting) c->fail(errc::unavailable, "service gave up after repeated crashes: " + st.last_reason);
    st.waiting.clear();
    self->quit(reason);
    return;
  }
  // First crash after a quiet window: start again from the shortest delay.
  if (st.policy->crashes_in_window(now) == 1) st.delays->reset();
  self->delayed_send(self, st.delays->next(), respawn_atom::value);
}

caf::behavior supervisor(supervisor_actor self, std::shared_ptr<supervision> sv) {
  auto& st = self->state;
  st.sv = std::move(sv);
  const auto& o = st.sv->opts;
  st.policy.emplace(o.max_restarts, o.window);
  st.delays.emplace(o.backoff_initial, o.backoff_max);
  self->set_exception_handler([](std::exception_ptr& e) { return exception_to_error(e); });
  self->set_down_handler([self](caf::down_msg& dm) {
    if (self->state.child && dm.source == self->state.child.address()) on_child_down(self, dm.reason);
  });
  self->set_exit_handler([self](caf::exit_msg& em) {
    if (self->state.children.erase(em.source) > 0) return;  // a child: the down handler owns it
    self->quit(em.reason);                                   // stop() or a linked peer died
  });
  start_child(self);
  return {
      [self](const call_ptr& c) {
        if (self->state.child)
          forward(self, c);
        else
          self->state.waiting.push_back(c);
      },
      [self](respawn_atom) {
        start_child(self);
        auto n = self->state.sv->restarts.fetch_add(1) + 1;
        self->state.sv->notify_restart(n, self->state.last_reason);
      },
  };
}

}  // namespace

caf::actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<supervision> shared) {
  return sys.spawn(supervisor, std::move(shared));
}

void send_call(const caf::actor& supervisor, call_ptr call) { caf::anon_send(supervisor, std::move(call)); }

}  // namespace loom::runtime::detail
