#include "libs/runtime/gateway.hpp"
#include "libs/runtime/leadership.hpp"
#include "libs/runtime/replica_logic.hpp"
#include "loom/v1/replica.pb.h"

#include "libs/audit/emitter.hpp"
#include "libs/auth/authorize.hpp"
#include "libs/auth/identity.hpp"
#include "libs/auth/policy.hpp"
#include "libs/metrics/metrics.hpp"
#include "libs/runtime/actor_host.hpp"
#include "libs/runtime/admission.hpp"
#include "libs/runtime/commit_ticket.hpp"
#include "libs/runtime/gateway_audit.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "libs/wire/server.hpp"
#include "loom/v1/service.pb.h"

#include <nlohmann/json.hpp>

#include <thread>

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdio>

#ifndef LOOM_VERSION
#define LOOM_VERSION "dev"
#endif

namespace loom::runtime {
namespace {
using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

// An audit reason as one line: control bytes (newline, carriage return,
// escape) written as \xHH. Reasons quote request fields (a node id, a path);
// raw, a newline in one would start a forged-looking row in `loom audit tail`.
// UTF-8 is kept: file names stay readable.
std::string one_line(const std::string& reason) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(reason.size());
  for (unsigned char ch : reason) {
    if (ch >= 0x20 && ch != 0x7f) {
      out += static_cast<char>(ch);
    } else {
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}
}  // namespace

// An audited reply whose record the spool has not made durable by then is
// sent anyway (the request has already taken effect; the record is still
// queued) and the delay is logged: the spool's disk is failing.
constexpr std::chrono::seconds max_audit_hold{5};

gateway::gateway(service_env& env, wire::router_server& server, actor_host& host, gateway_options opts)
    : env_(env), server_(server), host_(host), opts_(std::move(opts)), denials_(opts_.deny_merge_window) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  env_.audit->on_spooled([this] { wake(); });
}

gateway::~gateway() {
  env_.audit->on_spooled(nullptr);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void gateway::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void gateway::request_stop() {
  stop_.store(true);
  wake();
}

std::uint64_t gateway::current_epoch() {
  auto now = clock::now();
  if (now - epoch_read_ > std::chrono::seconds(1)) {
    epoch_read_ = now;
    if (auto e = auth::read_epoch(opts_.epoch_file)) epoch_ = *e;
  }
  return epoch_;
}

int gateway::run() {
  env_.metrics->set_up(true);
  while (!stop_.load()) {
    bool woke = false;
    auto in = server_.poll(std::chrono::milliseconds(100), wake_fd_, &woke);
    if (woke) {
      std::uint64_t n;
      [[maybe_unused]] auto r = ::read(wake_fd_, &n, sizeof n);
    }
    if (in) {
      if (!in->req) {
        // Undecodable: answer when we know whom to answer, count either way.
        env_.metrics->count_dropped("malformed");
        env_.metrics->count_request("malformed", in->req.code(), 0);
        if (!in->identity.empty())
          server_.send(in->identity, wire::error_reply(in->request_id, in->req.code(), in->req.err().message));
      } else {
        on_request(std::move(in->identity), std::move(in->peer_principal), std::move(*in->req));
      }
    }
    drain_finished();
    drain_committed();
    // A site enrolled or revoked meanwhile (keys/sites/): admitted or refused within a second.
    if (env_.admission) env_.admission->refresh_every(std::chrono::seconds(1), clock::now());
    expire(clock::now());
    emit_denial_summaries(false);
    release_held(clock::now());
    if (host_.escalated()) {
      std::fprintf(stderr, "%s: supervisor escalated (restart intensity exceeded); exiting\n", env_.name.c_str());
      env_.metrics->set_up(false);
      return 70;
    }
  }
  // Stopping: answers whose commit is still flushing go out once it is (≤ 1 s),
  // then what is held goes out once durable (bounded by the emitter's own
  // ≤ 1 s flush), so no caller of an executed request is left unanswered.
  for (auto until = clock::now() + std::chrono::seconds(1); clock::now() < until;) {
    drain_finished();
    drain_committed();
    bool waiting = false;
    for (const auto& [id, p] : pending_) waiting |= p.result.has_value();
    if (!waiting) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  emit_denial_summaries(true);  // the repeats of open windows are counted, not lost
  env_.audit->wait_spooled(std::chrono::milliseconds(1000));
  release_held(clock::now() + max_audit_hold);
  env_.metrics->set_up(false);
  return 0;
}

std::string gateway::peer_refusal(const std::string& peer, const std::string& type) const {
  if (peer == wire::unenrolled_principal && !auth::token_free(type))
    return "an unenrolled CURVE key may send only loom.v1.EnrolSiteRequest, not " + auth::printable(type);
  if (env_.admission && !env_.admission->still_admitted(peer))
    return "CURVE key " + peer + " is no longer admitted: its site was revoked";
  return "";
}

namespace {
loom::v1::ReplicaStatusReply replica_status(const service_env& env) {
  loom::v1::ReplicaStatusReply r;
  r.set_service(env.name);
  r.set_node_id(env.node_id);
  r.set_zone(env.zone);
  if (!env.leader) {
    r.set_role("single");
    r.set_leader(env.node_id);
    r.set_leader_endpoint(env.rpc_endpoint);
    return r;
  }
  const auto v = env.leader->snapshot();
  r.set_role(v.leading ? "leader" : "standby");
  r.set_epoch(static_cast<std::uint64_t>(v.epoch));
  r.set_leader(v.leading ? env.node_id : v.leader);
  r.set_leader_endpoint(v.leading ? env.rpc_endpoint : v.leader_endpoint);
  r.set_lease_left_ms(static_cast<std::uint64_t>(std::max<std::int64_t>(0, v.lease_left_ms)));
  r.set_view_age_ms(static_cast<std::uint64_t>(std::max<std::int64_t>(0, v.view_age_ms)));
  r.set_takeovers(v.takeovers);
  r.set_last_error(v.last_error);
  return r;
}

// The link a CURVE principal came over, as link_bytes_total labels it: an
// enrolled edge site's name ("site:<S>:<service>"), else "local" (this
// deployment's own keys; "unenrolled" for an enrolment's key).
std::string link_of(const std::string& peer) {
  constexpr std::string_view prefix = "site:";
  if (peer.rfind(prefix, 0) == 0) return peer.substr(prefix.size(), peer.find(':', prefix.size()) - prefix.size());
  return peer == wire::unenrolled_principal ? "unenrolled" : "local";
}
}  // namespace

void gateway::on_request(std::string identity, std::string peer, wire::request req) {
  auto started = clock::now();
  if (auto why = peer_refusal(peer, req.type); !why.empty()) {
    env_.metrics->count_denied(to_string(errc::permission_denied));
    env_.metrics->count_request(req.type, errc::permission_denied, seconds_since(started));
    deny(std::move(identity), denial{"", "", req.type, why, peer, req.request_id}, errc::permission_denied);
    return;
  }
  auth::auth_context actx{opts_.token_key, unix_now_s(), current_epoch(), env_.zone, peer, {}};
  if (env_.admission)
    actx.site_admitted = [adm = env_.admission](std::string_view site) { return adm->site_admitted(site); };
  auto d = auth::authorize(req.type, req.token, actx);
  std::string principal = d.who ? d.who->principal : "";
  std::string role = d.who ? std::string(auth::to_string(d.who->r)) : "";
  std::string tenant = d.who ? std::string(auth::tenant_of(*d.who)) : "";
  std::string record_tenant = d.who ? auth::record_tenant(principal, tenant) : "";
  if (!d.allowed) {
    env_.metrics->count_denied(to_string(d.code));
    env_.metrics->count_request(req.type, d.code, seconds_since(started));
    deny(std::move(identity), denial{principal, role, req.type, d.reason, peer, req.request_id, record_tenant},
         d.code);
    return;
  }

  // Counted once authorized: a type label only for what the table knows.
  env_.metrics->count_link(link_of(peer), req.type, "in", req.body.size() + req.token.size() + req.request_id.size());
  if (req.type == loom::v1::HealthRequest::descriptor()->full_name()) {
    loom::v1::HealthReply h;
    h.set_service(env_.name);
    h.set_healthy(!host_.escalated());
    h.set_pid(static_cast<std::uint32_t>(::getpid()));
    h.set_uptime_ms(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started_).count()));
    h.set_restarts(host_.restarts());
    h.set_version(LOOM_VERSION);
    h.set_node_id(env_.node_id);
    h.set_zone(env_.zone);
    h.set_endpoint(env_.rpc_endpoint);
    h.set_metrics_endpoint(layout::advertised(env_.eps.net, env_.metrics->endpoint()));
    h.set_audit_spooled(env_.audit->pending() + env_.audit->queued());
    (*h.mutable_checks())["actor"] = host_.escalated() ? "escalated" : "ok";
    env_.metrics->count_request(req.type, errc::ok, seconds_since(started));
    server_.send(identity, wire::ok_reply(req, h));
    return;
  }
  if (req.type == loom::v1::ReplicaStatusRequest::descriptor()->full_name()) {
    env_.metrics->count_request(req.type, errc::ok, seconds_since(started));
    server_.send(identity, wire::ok_reply(req, replica_status(env_)));
    return;
  }
  // A standby runs no logic: every other request is sent to the leader
  // (not audited: nothing was done; the leader audits what it does).
  if (env_.leader && !env_.leader->leading()) {
    auto h = not_leader(*env_.leader, env_.name, env_.node_id);
    env_.metrics->count_request(req.type, h.code, seconds_since(started));
    wire::reply rep = wire::error_reply(req.request_id, h.code, h.message);
    rep.type = h.type;
    rep.body = h.body;
    server_.send(identity, rep);
    return;
  }

  auto id = next_id_++;
  pending p{identity, req.request_id, req.type, started, started + opts_.deadline, d.mutating,
            principal, role, tenant, peer, record_tenant, std::nullopt};
  pending_.emplace(id, std::move(p));
  call_context ctx{req.request_id, principal, role, env_.zone, tenant, peer};
  host_.post(std::move(req.type), std::move(req.body), std::move(ctx), [this, id](handled h) {
    {
      std::lock_guard lock(mu_);
      finished_.push_back({id, std::move(h)});
    }
    wake();
  });
}

void gateway::deny(std::string identity, const denial& d, errc code) {
  deny(std::move(identity), d, wire::error_reply(d.request_id, code, d.reason));
}

void gateway::deny(std::string identity, const denial& d, wire::reply rep, const std::string& job_id,
                   const std::string& payload) {
  std::uint64_t first = 0;
  if (!denials_.admit(d, clock::now(), &first)) {
    // Counted into the window's summary; answered once the window's first
    // record is durable (it nearly always is by now).
    send_after_audit(first, std::move(identity), std::move(rep));
    return;
  }
  auto ordinal = emit_audit(d.principal, d.role, d.action, d.request_id, audit::decision::deny, d.reason, d.peer,
                            d.tenant, job_id, payload);
  denials_.opened(d, ordinal);
  send_after_audit(ordinal, std::move(identity), std::move(rep));
}

void gateway::emit_denial_summaries(bool all) {
  auto closed = all ? denials_.flush() : denials_.due(clock::now());
  for (const auto& s : closed) {
    // Same principal, action, reason and peer as the records it summarises;
    // the count and the merged request ids ride in the payload.
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(s.window).count();
    // Request ids come from clients: serialised, never spliced into JSON.
    std::string payload = nlohmann::json{{"merged_denials", s.repeats},
                                         {"window_ms", ms},
                                         {"first_request_id", s.first_request_id},
                                         {"last_request_id", s.last.request_id}}
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    emit_audit(s.last.principal, s.last.role, s.last.action, "", audit::decision::deny, s.last.reason, s.last.peer,
               s.last.tenant, "", payload);
  }
}

void gateway::answer(const pending& p, const handled& h) {
  wire::reply rep;
  rep.request_id = p.request_id;
  rep.code = h.code;
  rep.message = h.message;
  rep.type = h.type;
  rep.body = h.body;
  env_.metrics->count_request(p.type, h.code, seconds_since(p.started));
  env_.metrics->count_link(link_of(p.peer), p.type, "out", rep.body.size() + rep.message.size());
  if (is_denial(h.code)) env_.metrics->count_denied(to_string(h.code));
  // The logic may know the record's tenant better than the token (a service acting for a job).
  const std::string& tenant = h.audit_tenant.empty() ? p.record_tenant : h.audit_tenant;
  switch (record_of(p.mutating, h.code)) {
    case reply_record::none:
      server_.send(p.identity, rep);
      return;
    case reply_record::denial:  // the logic refused a read: recorded like a gateway denial
      deny(p.identity, denial{p.principal, p.role, p.type, h.message, p.peer, p.request_id, tenant}, std::move(rep),
           h.audit_job_id, h.audit_payload);
      return;
    case reply_record::request:
      break;
  }
  auto ordinal = emit_audit(p.principal, p.role, p.type, p.request_id, decision_of(h.code), h.message, p.peer, tenant,
                            h.audit_job_id, h.audit_payload);
  send_after_audit(ordinal, p.identity, std::move(rep));
}

void gateway::send_after_audit(std::uint64_t ordinal, std::string identity, wire::reply rep) {
  if (held_.empty() && env_.audit->spooled() >= ordinal) {
    server_.send(identity, rep);
    return;
  }
  held_.push_back({ordinal, clock::now(), std::move(identity), std::make_unique<wire::reply>(std::move(rep))});
}

void gateway::release_held(clock::time_point now) {
  auto durable = env_.audit->spooled();
  while (!held_.empty()) {
    auto& h = held_.front();
    if (h.ordinal > durable) {
      if (now - h.since < max_audit_hold) break;
      std::fprintf(stderr, "%s: audit record %llu not durable after %llds (spool write failing?); answering anyway\n",
                   env_.name.c_str(), static_cast<unsigned long long>(h.ordinal),
                   static_cast<long long>(max_audit_hold.count()));
    }
    server_.send(h.identity, *h.rep);
    held_.pop_front();
  }
}

std::uint64_t gateway::emit_audit(const std::string& principal, const std::string& role, const std::string& action,
                                  const std::string& request_id, audit::decision outcome, const std::string& reason,
                                  const std::string& peer, const std::string& tenant, const std::string& job_id,
                                  const std::string& payload) {
  audit::record r;
  r.principal = principal;
  r.role = role;
  r.zone = env_.zone;
  r.action = action;
  r.request_id = request_id;
  r.outcome = outcome;
  r.reason = one_line(reason);
  r.service = env_.name;
  r.peer = peer;
  r.tenant = tenant;
  r.job_id = job_id;
  r.payload = payload;
  return env_.audit->emit(std::move(r));
}

void gateway::drain_finished() {
  std::deque<finished> done;
  {
    std::lock_guard lock(mu_);
    done.swap(finished_);
  }
  for (auto& f : done) {
    auto it = pending_.find(f.id);
    if (it == pending_.end()) continue;  // already answered with deadline_exceeded
    if (f.result.durable && !f.result.durable->outcome()) {
      // Answered, not yet durable: wait for the commit (the ticket wakes us).
      auto ticket = f.result.durable;
      it->second.result = std::move(f.result);
      ticket->on_resolved([this] { wake(); });
      continue;
    }
    answer_durable(it->second, f.result);
    pending_.erase(it);
  }
}

void gateway::answer_durable(const pending& p, handled h) {
  if (h.durable) {
    auto outcome = h.durable->outcome();
    if (outcome && !outcome->ok()) {  // the effect was not kept: the caller learns so
      // A replica deposed while the change waited (the fence refused it):
      // NotLeader, so the caller's client retries at the leader under the
      // same request id (nothing was kept here; the leader's answer is
      // idempotent by request id).
      if (env_.leader && (outcome->code() == errc::permission_denied || !env_.leader->leading())) {
        answer(p, not_leader(*env_.leader, env_.name, env_.node_id));
        return;
      }
      handled failed;
      failed.code = errc::unavailable;
      failed.message = env_.name + ": the state store did not keep the change: " + outcome->err().message;
      answer(p, failed);
      return;
    }
  }
  answer(p, h);
}

void gateway::drain_committed() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!it->second.result || !it->second.result->durable->outcome()) {
      ++it;
      continue;
    }
    answer_durable(it->second, std::move(*it->second.result));
    it = pending_.erase(it);
  }
}

void gateway::expire(clock::time_point now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now < it->second.deadline) {
      ++it;
      continue;
    }
    handled h;
    h.code = errc::deadline_exceeded;
    h.message = env_.name + " did not answer " + it->second.type + " in time (service actor restarting?)";
    answer(it->second, h);
    it = pending_.erase(it);
  }
}

}  // namespace loom::runtime
