#include "services/scheduler/scheduler_logic.hpp"

#include <map>
#include "libs/metrics/metrics.hpp"
#include "loom/v1/sites.pb.h"
#include "services/scheduler/store_replies.hpp"

#include <nlohmann/json.hpp>

#include "libs/auth/token.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/runtime/admission.hpp"
#include "libs/runtime/commit_ticket.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "services/scheduler/wire.hpp"
#include "libs/store/database.hpp"
#include "libs/store/group_commit.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/models.pb.h"
#include "loom/v1/sites.pb.h"
#include "services/scheduler/node_repo.hpp"
#include "services/scheduler/models/model_registry.hpp"
#include "services/scheduler/sites/site_registry.hpp"

#include <cstdio>
#include <stdexcept>

namespace loom::scheduler {
namespace {
using namespace loom::runtime;

// How recently a stored node must have been seen for a scheduler taking over
// to give it a fresh liveness window (see the constructor).
constexpr std::chrono::seconds recent_enough{10};

caller caller_of(const call_context& ctx, const std::string& body) {
  caller c;
  c.principal = ctx.principal.empty() ? "anonymous" : ctx.principal;
  c.role = ctx.role;
  c.tenant = ctx.tenant.empty() ? "default" : ctx.tenant;
  c.request_id = ctx.request_id;
  c.body_sha256 = crypto::sha256_hex(body);
  c.service_zone = ctx.zone;
  return c;
}

bool known_state(const std::string& s) {
  return s.empty() || s == "queued" || s == "running" || s == "succeeded" || s == "failed" || s == "cancelled";
}
}  // namespace

struct scheduler_logic::pending_commit {
  std::shared_ptr<runtime::commit_ticket> ticket = std::make_shared<runtime::commit_ticket>();
  std::mutex mu;
  int outstanding = 1;  // the call itself, until finish_batch()
  status outcome;       // the first failure, if any
  void done(status s) {
    bool last;
    status out;
    {
      std::lock_guard lk(mu);
      if (!s.ok() && outcome.ok()) outcome = std::move(s);
      last = --outstanding == 0;
      out = outcome;
    }
    if (last) ticket->resolve(std::move(out));
  }
};

scheduler_logic::scheduler_logic(store::database* db, clock_fn now, std::string jobs_root,
                                 job_event_sink on_job_event, std::chrono::milliseconds min_runtime,
                                 std::unique_ptr<store::database> writer, std::string home_zone)
    : db_(db), now_(std::move(now)), jobs_(db, std::move(jobs_root), min_runtime) {
  register_handlers();
  jobs_.set_home_zone(std::move(home_zone));
  if (on_job_event)
    jobs_.set_event_sink([this, sink = std::move(on_job_event)](const job_rec& j, const job_event& e) {
      event_caller by;
      if (call_) by = {call_->principal, call_->role, call_->tenant, call_->peer, call_->request_id};
      sink(j, e, by);
    });
  if (writer) {
    writer_ = std::make_unique<store::group_commit>(std::move(writer));
    jobs_.set_async_writer([this](job_manager::unit u) { enqueue(std::move(u)); });
  }
  if (!db_) return;
  auto nodes = db_->with_read_transaction([](store::transaction& tx) { return load_nodes(tx); });
  if (!nodes) throw std::runtime_error("cannot load the roster: " + nodes.err().to_string());
  // A scheduler taking over (a standby after a failover, a restart) heard no
  // heartbeat yet, and what the last one stored is up to a tick old: a node
  // seen within the last few seconds starts a fresh liveness window now, so
  // its running stage is re-attached, not requeued, and its heartbeats have
  // two whole windows to find the new leader: a node's registrar may be in
  // its back-off (up to 2 s) and its next call may try the old leader first
  // (1 s per replica), and one window was found too short (the three-zone
  // replicas test: a 7.7 s failover requeued both running jobs). A node that
  // does not beat again is dead two windows after the takeover.
  const auto at = now_();
  const auto grace = 2 * roster_.interval() * wire::heartbeat_max_missed;
  for (auto& n : *nodes) {
    const bool recent = at - n.last_seen < recent_enough;
    if (recent) n.last_seen = std::max(n.last_seen, at);
    roster_.restore(std::move(n), recent ? at + grace : time_point{});
  }
  auto bound = db_->with_read_transaction([](store::transaction& tx) { return load_bindings(tx); });
  if (!bound) throw std::runtime_error("cannot load the node bindings: " + bound.err().to_string());
  for (auto& [id, b] : *bound) roster_.bind(id, std::move(b));
  if (auto st = jobs_.load(roster_, at); !st) throw std::runtime_error("cannot load the jobs: " + st.err().to_string());
}

scheduler_logic::~scheduler_logic() = default;

void scheduler_logic::enqueue(job_manager::unit u) {
  if (!current_) current_ = std::make_shared<pending_commit>();
  auto pc = current_;
  {
    std::lock_guard lk(pc->mu);
    ++pc->outstanding;
  }
  writer_->submit_async(std::move(u), [this, pc](status s) {
    if (!s.ok()) {
      std::lock_guard lk(failure_mu_);
      if (!commit_failure_) commit_failure_ = s.err().to_string();
    }
    pc->done(std::move(s));
  });
}

void scheduler_logic::finish_batch() {
  if (!current_) return;
  current_->done(ok_status());
  current_.reset();
}

status scheduler_logic::persist(const std::function<status(store::transaction&)>& fn) {
  if (!db_) return {};
  return db_->with_transaction([&](store::transaction& tx) { return fn(tx); });
}

namespace {
// What a successful request of `type` changed, as the change events name it; nullptr: nothing seen.
const char* change_topic(std::string_view type) {
  static const std::map<std::string_view, const char*> topics = {
      {"loom.v1.SubmitJobRequest", "jobs"},         {"loom.v1.CancelJobRequest", "jobs"},
      {"loom.v1.PollWorkRequest", "jobs"},          {"loom.v1.RegisterNodeRequest", "roster"},
      {"loom.v1.DrainNodeRequest", "roster"},       {"loom.v1.UndrainNodeRequest", "roster"},
      {"loom.v1.IssueSiteTokenRequest", "sites"},   {"loom.v1.EnrolSiteRequest", "sites"},
      {"loom.v1.RevokeSiteRequest", "sites"},       {"loom.v1.RollbackModelRequest", "models"}};
  auto it = topics.find(type);
  return it == topics.end() ? nullptr : it->second;
}
}  // namespace

handled scheduler_logic::handle(const std::string& type, const std::string& body, const call_context& ctx) {
  {
    std::lock_guard lk(failure_mu_);
    if (commit_failure_)  // memory is ahead of the store: restart from what it kept
      throw std::runtime_error("state store: a group commit failed (" + *commit_failure_ + "); reloading");
  }
  struct in_call {  // the request job events name while it is handled
    const call_context*& slot;
    ~in_call() { slot = nullptr; }
  } scope{call_};
  call_ = &ctx;
  handled h = table_.dispatch(type, body, ctx);
  if (current_) {
    h.durable = current_->ticket;
    if (!h.audit_job_id.empty()) unsettled_[h.audit_job_id] = current_->ticket;
  } else if (!h.audit_job_id.empty()) {
    // Nothing written by this call (a repeated submit or cancel): it waits for
    // the commit that made what it names, when that is still in flight.
    if (auto it = unsettled_.find(h.audit_job_id); it != unsettled_.end()) {
      auto t = it->second.lock();
      if (t && !t->outcome()) h.durable = std::move(t);
      else unsettled_.erase(it);
    }
  }
  finish_batch();
  if (changed_ && h.code == errc::ok)
    if (const char* topic = change_topic(type)) changed_(topic);
  return h;
}

void scheduler_logic::register_handlers() {
  using namespace loom::v1;
  using ctx_t = const call_context&;
  table_
      // A node joins (or a restarted one re-joins) the roster: written, then applied.
      .on<RegisterNodeRequest>([this](const RegisterNodeRequest& r, ctx_t c) { return register_node(r, c); })
      // A node's liveness; known=false asks it to register again.
      .on<NodeHeartbeatRequest>([this](const NodeHeartbeatRequest& r, ctx_t c) { return heartbeat(r, c); })
      // The roster with each node's state now.
      .on<ListNodesRequest>([this](const ListNodesRequest& r, ctx_t) { return list_nodes(r); })
      // Mark a node draining: its stages finish, nothing new is placed there (admin or its site; kept).
      .on<DrainNodeRequest>([this](const DrainNodeRequest& r, ctx_t c) {
        return set_drained(r.node().value(), r.reason(), true, c);
      })
      // Undo a drain: the node takes work again (admin or its site).
      .on<UndrainNodeRequest>([this](const UndrainNodeRequest& r, ctx_t c) {
        return set_drained(r.node().value(), r.reason(), false, c);
      })
      // A trainer's progress report; the answer carries its assignment, stop, acknowledged notices.
      .on<PollWorkRequest>([this](const PollWorkRequest& r, ctx_t c) { return poll_work(r, c); })
      // A job from a template and overrides, checked in full before it is stored.
      .on<SubmitJobRequest>([this](const SubmitJobRequest& r, ctx_t c) { return submit_job(r, c); })
      // The caller's tenant's jobs (every tenant for an admin).
      .on<ListJobsRequest>([this](const ListJobsRequest& r, ctx_t c) { return list_jobs(r, c); })
      // One job, its stages (with waiting reasons) and its events after a seq.
      .on<GetJobRequest>([this](const GetJobRequest& r, ctx_t c) { return get_job(r, c); })
      // Cancel a job; a retry with the same request id answers what the first did.
      .on<CancelJobRequest>([this](const CancelJobRequest& r, ctx_t c) { return cancel_job(r, c); })
      // Admin: a one-time enrolment token for an edge site.
      .on<IssueSiteTokenRequest>([this](const IssueSiteTokenRequest& r, ctx_t c) { return issue_site_token(r, c); })
      // Admin: revoke a site; its keys leave every cloud service's allow-list.
      .on<RevokeSiteRequest>([this](const RevokeSiteRequest& r, ctx_t c) { return revoke_site(r, c); })
      // The sites with their trainers, link and datasets.
      .on<ListSitesRequest>([this](const ListSitesRequest& r, ctx_t) { return list_sites(r); })
      .on<SiteKeysRequest>([this](const SiteKeysRequest& r, ctx_t c) { return site_keys(r, c); })
      // The model registry, the caller's tenant's versions (every tenant's for an admin).
      .on<ListModelsRequest>([this](const ListModelsRequest& r, ctx_t c) { return list_models(r, c); })
      .on<GetModelRequest>([this](const GetModelRequest& r, ctx_t c) { return get_model(r, c); })
      .on<DiffModelsRequest>([this](const DiffModelsRequest& r, ctx_t c) { return diff_models(r, c); })
      .on<RollbackModelRequest>([this](const RollbackModelRequest& r, ctx_t c) { return rollback_model(r, c); })
      // A trainer's check or export (for its caller): the version and lineage, then the audit record.
      .on<ResolveModelVersionRequest>([this](const ResolveModelVersionRequest& r, ctx_t c) { return resolve_model_version(r, c); })
      .on<RecordModelExportRequest>([this](const RecordModelExportRequest& r, ctx_t c) { return record_model_export(r, c); })
      // A site enrols with its token and keys (no bearer token: sites/site_handlers.cpp).
      .on<EnrolSiteRequest>([this](const EnrolSiteRequest& r, ctx_t) { return enrol_site(r); });
}

void scheduler_logic::describe(const job_rec& j, loom::v1::JobInfo* o) const {
  to_wire(j, o);
  for (std::size_t i = 0; i < j.stages.size(); ++i)
    o->mutable_stages(static_cast<int>(i))->set_waiting(jobs_.waiting(j, i, roster_, now_()));
}

handled scheduler_logic::submit_job(const loom::v1::SubmitJobRequest& req, const call_context& ctx) {
  submit_args a = from_wire(req);
  if (!a.tenant.empty())
    if (auto st = auth::validate_name("tenant", a.tenant); !st) return fail(st.err());
  auto r = jobs_.submit(a, caller_of(ctx, req.SerializeAsString()), roster_, now_());
  if (!r) return refused_or_store(r.err());
  loom::v1::SubmitJobReply rep;
  describe(*r->first, rep.mutable_job());
  rep.set_existed(r->second);
  auto h = reply(rep);
  h.audit_job_id = r->first->id;
  h.audit_payload = nlohmann::json{{"template", a.template_name}, {"overrides", a.overrides},
                                   {"priority_class", a.priority_class}, {"tenant", a.tenant}, {"zone", a.zone},
                                   {"existed", r->second}}
                        .dump();
  return h;
}

handled scheduler_logic::list_jobs(const loom::v1::ListJobsRequest& req, const call_context& ctx) {
  if (!known_state(req.state()))
    return fail(errc::invalid_argument, "ListJobs: state " + req.state() +
                                            " is not one of queued, running, succeeded, failed, cancelled");
  loom::v1::ListJobsReply rep;
  for (const job_rec* j : jobs_.list(req.state(), caller_of(ctx, ""))) describe(*j, rep.add_jobs());
  return reply(rep);
}

handled scheduler_logic::get_job(const loom::v1::GetJobRequest& req, const call_context& ctx) {
  auto found = jobs_.find_for(req.id(), caller_of(ctx, ""));
  if (!found) return fail(found.err());
  loom::v1::GetJobReply rep;
  describe(**found, rep.mutable_job());
  auto evs = jobs_.events(req.id(), req.events_after());
  if (!evs) return store_failed(evs.err());
  for (const auto& e : *evs) to_wire(e, rep.add_events());
  return reply(rep);
}

handled scheduler_logic::cancel_job(const loom::v1::CancelJobRequest& req, const call_context& ctx) {
  auto j = jobs_.cancel(req.id(), req.reason(), caller_of(ctx, req.SerializeAsString()), now_());
  if (!j) return refused_or_store(j.err());
  loom::v1::CancelJobReply rep;
  describe(**j, rep.mutable_job());
  auto h = reply(rep);
  h.audit_job_id = (*j)->id;
  h.audit_payload = nlohmann::json{{"reason", req.reason()}}.dump();
  return h;
}

void scheduler_logic::on_tick() {
  std::erase_if(unsettled_, [](const auto& kv) {
    auto t = kv.second.lock();
    return !t || t->outcome().has_value();
  });
  jobs_.tick(roster_, now_());
  if (changed_) {  // a node turned alive, suspect or dead since the last tick
    std::string digest;
    for (const auto& [id, n] : roster_.all()) digest += id + '=' + to_string(roster_.state(n, now_())) + ';';
    if (digest != roster_digest_) {
      roster_digest_ = std::move(digest);
      changed_("roster");
    }
  }
  finish_batch();  // tick's writes have no caller waiting
  std::vector<node> lost;
  auto gone = roster_.reap(now_(), std::chrono::minutes(1), metrics_ ? &lost : nullptr);
  for (const auto& n : lost) metrics_->add("nodes_lost_total", {{"zone", n.zone}, {"service", n.service}});
  publish_gauges(now_());
  std::vector<std::pair<std::string, time_point>> seen(seen_.begin(), seen_.end());
  if (gone.empty() && seen.empty()) return;
  auto st = persist([&](store::transaction& tx) -> status {
    if (auto s = touch_nodes(tx, seen); !s) return s;
    for (const auto& id : gone)
      if (auto s = delete_node(tx, id); !s) return s;
    return {};
  });
  if (st) seen_.clear();  // else kept and retried next tick
}

void scheduler_logic::publish_gauges(time_point now) {
  if (!metrics_ || now - gauges_at_ < std::chrono::seconds(2)) return;
  gauges_at_ = now;
  // Every {zone, service} of a live node counts from 0, so a first loss is an increase.
  for (const auto& [id, n] : roster_.all()) metrics_->add("nodes_lost_total", {{"zone", n.zone}, {"service", n.service}}, 0);
  if (!sites_) return;
  auto all = sites_->list();
  if (!all) return;  // the store away: the last values stand
  for (const auto& s : *all) {
    loom::v1::SiteInfo info;
    describe(s, &info);
    const bool down = s.state == "enrolled" && info.has_link() && info.link().state() == "down";
    metrics_->set("site_link_down", {{"site", s.name}}, down ? 1 : 0);
  }
}

}  // namespace loom::scheduler
