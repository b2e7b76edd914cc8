// Scheduler replicas from a test or benchmark (issue 30): each replica's
// ReplicaStatus (asked of that process alone), who leads, a job submitted
// over the wire, and a client load that records when its calls succeed, to
// measure client-visible failover. Header-only; tests and benchmarks only.
#pragma once

#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/replica.pb.h"

#include <zmq.hpp>

#include <signal.h>

#include <algorithm>
#include <map>
#include <memory>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace loom::test {

struct replica_view {
  std::string name;  // scheduler, scheduler-2, ...
  bool answered = false;
  std::string role, leader, error;
  std::uint64_t epoch = 0;
  long pid = 0;
};

// An admin token of the deployment at `p` (its current revocation epoch).
inline std::string admin_token(const layout::paths& p) {
  auto key = auth::load_token_key(p.token_key());
  auto epoch = auth::read_epoch(p.epoch());
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auth::claims c{"tester", auth::role::admin, {"*"}, now + 3600, epoch ? *epoch : 0, now};
  auto t = key ? auth::issue_token(c, *key) : result<std::string>(key.err());
  return t ? *t : "";
}

// The CURVE material a test client of a replicated service (the scheduler,
// or `kind`: "audit") presents.
struct scheduler_access {
  layout::paths paths;
  std::string kind;
  std::string server_key;
  wire::curve_keypair mine;
  std::string token;
  bool ok = false;
  explicit scheduler_access(layout::paths p, std::string k = "scheduler") : paths(std::move(p)), kind(std::move(k)) {
    auto s = wire::load_public_key(paths.curve_dir(), kind);
    auto m = wire::load_keypair(paths.curve_dir(), "client");
    ok = s.ok() && m.ok();
    if (ok) {
      server_key = *s;
      mine = *m;
    }
    token = admin_token(paths);
  }
  // Where the replicas are (and their pids): `source` when set (replicas on
  // several hosts), else the deployment's endpoints.json.
  std::function<layout::endpoints()> source;
  layout::endpoints eps() const {
    if (source) return source();
    auto e = layout::read_endpoints(paths.endpoints());
    return e ? *e : layout::endpoints{};
  }
};

// Every replica's own answer, asked of that process alone (short timeout).
// The clients are kept between calls (one per endpoint), so polling does not
// make a CURVE handshake with every replica each time.
class replica_watch {
 public:
  replica_watch(zmq::context_t& ctx, const scheduler_access& a) : ctx_(ctx), a_(a) {}
  std::vector<replica_view> views(std::chrono::milliseconds timeout = std::chrono::milliseconds(300)) {
    std::vector<replica_view> out;
    const auto eps = a_.eps();
    for (int k = 1; k <= eps.count_of(a_.kind); ++k) {
      replica_view v;
      v.name = layout::instance_name(a_.kind, k);
      const auto* ep = eps.find(v.name);
      if (ep) v.pid = ep->pid;
      if (ep && !ep->rpc.empty()) {
        auto& cli = clients_[ep->rpc];
        if (!cli) cli = std::make_unique<wire::client>(ctx_, ep->rpc, a_.server_key, a_.mine, wire::client_options{timeout, 0});
        auto r = wire::call_typed<loom::v1::ReplicaStatusReply>(*cli, loom::v1::ReplicaStatusRequest{}, a_.token);
        if (r) {
          v.answered = true;
          v.role = r->role();
          v.leader = r->leader();
          v.epoch = r->epoch();
        } else {
          v.error = r.err().message;
        }
      }
      out.push_back(std::move(v));
    }
    return out;
  }

 private:
  zmq::context_t& ctx_;
  const scheduler_access& a_;
  std::map<std::string, std::unique_ptr<wire::client>> clients_;
};

// The replica that says it leads, when exactly one does.
inline std::optional<replica_view> sole_leader(const std::vector<replica_view>& vs) {
  std::optional<replica_view> found;
  for (const auto& v : vs)
    if (v.answered && v.role == "leader") {
      if (found) return std::nullopt;
      found = v;
    }
  return found;
}

// A job submitted over the wire through every replica (failover included):
// pipeline-test on the GPL-3 text Debian ships, with `overrides` added.
inline result<loom::v1::SubmitJobReply> submit_job(wire::client& cli, const std::string& token,
                                                   const std::string& request_id,
                                                   const std::vector<std::string>& overrides) {
  static const std::string toml = [] {
    auto t = files::read_file(std::string(LOOM_SOURCE_DIR) + "/templates/pipeline-test.toml");
    return t ? *t : std::string();
  }();
  loom::v1::SubmitJobRequest req;
  req.set_template_name("pipeline-test");
  req.set_template_toml(toml);
  req.add_overrides("text=/usr/share/common-licenses/GPL-3");
  for (const auto& o : overrides) req.add_overrides(o);
  auto w = wire::make_request(req, token);
  w.request_id = request_id;
  auto rep = cli.call(std::move(w));
  if (!rep) return rep.err();
  if (!rep->ok()) return make_error(rep->code, rep->message);
  loom::v1::SubmitJobReply out;
  if (!out.ParseFromString(rep->body)) return make_error(errc::internal, "undecodable SubmitJobReply");
  return out;
}

// submit_job until it is answered: a submit whose answer was lost in a
// takeover (unavailable after the client's own retries) has an unknown
// outcome, so it is asked again with the same request id, as any client must,
// and answered with the one job that request made — never a second one. At
// most 6 tries.
inline result<loom::v1::SubmitJobReply> submit_job_answered(wire::client& cli, const std::string& token,
                                                            const std::string& request_id,
                                                            const std::vector<std::string>& overrides = {}) {
  auto r = submit_job(cli, token, request_id, overrides);
  for (int tries = 0; !r.ok() && r.code() == errc::unavailable && tries < 5; ++tries)
    r = submit_job(cli, token, request_id, overrides);
  return r;
}

// A steady client load on the replica set: ListJobs every `period`, each
// success's completion time kept. failover_after(t) = how long after `t` the
// first call succeeded: the client-visible failover of a kill at t.
class replica_load {
 public:
  using clock = std::chrono::steady_clock;
  replica_load(zmq::context_t& ctx, const scheduler_access& a,
               std::chrono::milliseconds period = std::chrono::milliseconds(5))
      : thread_([this, &ctx, &a, period] {
          wire::client cli(ctx, a.eps().rpc_targets("scheduler"), a.server_key, a.mine,
                           wire::client_options{std::chrono::milliseconds(2000), 2});
          while (!stop_) {
            auto r = wire::call_typed<loom::v1::ListJobsReply>(cli, loom::v1::ListJobsRequest{}, a.token);
            const auto now = clock::now();
            {
              std::lock_guard lock(mu_);
              if (r) {
                ok_.push_back(now);
                jobs_ = r->jobs_size();
              } else {
                ++failed_;
                last_error_ = r.err().message;
              }
            }
            std::this_thread::sleep_for(period);
          }
        }) {}
  ~replica_load() {
    stop_ = true;
    thread_.join();
  }
  // ms from `t` to the first success after it; -1 while none.
  double failover_after(clock::time_point t) const {
    std::lock_guard lock(mu_);
    auto it = std::upper_bound(ok_.begin(), ok_.end(), t);
    if (it == ok_.end()) return -1;
    return std::chrono::duration<double, std::milli>(*it - t).count();
  }
  std::size_t successes() const {
    std::lock_guard lock(mu_);
    return ok_.size();
  }
  std::size_t failures() const {
    std::lock_guard lock(mu_);
    return failed_;
  }
  std::string last_error() const {
    std::lock_guard lock(mu_);
    return last_error_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<clock::time_point> ok_;
  std::size_t failed_ = 0;
  int jobs_ = 0;
  std::string last_error_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

inline bool all_answer(const std::vector<replica_view>& vs) {
  for (const auto& v : vs)
    if (!v.answered) return false;
  return !vs.empty();
}

inline std::string describe(const std::vector<replica_view>& vs) {
  std::string out;
  for (const auto& v : vs)
    out += v.name + ": " +
           (v.answered ? v.role + " epoch " + std::to_string(v.epoch) + " leader " + v.leader
                       : "no answer (" + v.error + ")") +
           "; ";
  return out;
}

// Asks every replica until `pred(views)` holds or `limit` passes; the last views.
template <class P>
std::vector<replica_view> wait_views(replica_watch& w, P pred, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<replica_view> vs;
  do {
    vs = w.views();
    if (pred(vs)) return vs;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  return vs;
}

// One failover: waits for a sole leader with every replica answering, lets
// `load` see it, kills it with SIGKILL, runs `during` (e.g. a submit in the
// middle of the takeover), waits for another replica to lead at a higher
// epoch and for the load to be answered again, then for the watcher's
// restart of the killed one to answer (as a standby, or as the leader when
// its restart won the lease). `why` says what did not happen.
struct failover_round {
  bool ok = false;
  std::string why;
  replica_view old, now;
  bool own_restart = false;  // `now` is the killed replica's restart
  double client_ms = -1;  // kill -> the load's first success after it
};
template <class F>
failover_round kill_leader(replica_watch& w, replica_load& load, F during) {
  using namespace std::chrono_literals;
  failover_round r;
  auto vs = wait_views(w, [](const auto& v) { return all_answer(v) && sole_leader(v); }, 40s);
  if (!sole_leader(vs) || !all_answer(vs)) return r.why = "no sole leader before the kill: " + describe(vs), r;
  r.old = *sole_leader(vs);
  if (r.old.pid <= 0) return r.why = "no pid recorded for " + r.old.name, r;
  const auto seen = load.successes();
  for (auto until = std::chrono::steady_clock::now() + 5s;
       load.successes() < seen + 3 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(2ms);
  const auto killed = std::chrono::steady_clock::now();
  if (::kill(static_cast<pid_t>(r.old.pid), SIGKILL) != 0) return r.why = "kill failed", r;
  during();
  // Any leader at a higher epoch is a takeover: the killed process is dead,
  // so whoever answers as leader is another one — a standby, or the killed
  // replica's own restart when the watcher brought it back before a standby
  // won the expired lease (both are the same race on the lease).
  auto took_over = [&](const auto& v) {
    auto l = sole_leader(v);
    return l && l->epoch > r.old.epoch;
  };
  vs = wait_views(w, took_over);
  if (!took_over(vs)) return r.why = "no takeover after killing " + r.old.name + ": " + describe(vs), r;
  r.now = *sole_leader(vs);
  r.own_restart = r.now.name == r.old.name;
  for (auto until = std::chrono::steady_clock::now() + 15s;
       (r.client_ms = load.failover_after(killed)) < 0 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(5ms);
  if (r.client_ms < 0) return r.why = "the load got no answer after the takeover: " + load.last_error(), r;
  vs = wait_views(w, [&](const auto& v) {
    for (const auto& x : v)
      if (x.name == r.old.name) return all_answer(v) && sole_leader(v) && x.pid != r.old.pid;
    return false;
  }, 40s);
  if (!all_answer(vs)) return r.why = r.old.name + " did not come back: " + describe(vs), r;
  r.ok = true;
  return r;
}

// The p-th percentile (0..100) of `v` (nearest rank); 0 when empty.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace loom::test
