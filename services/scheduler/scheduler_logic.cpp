#include "services/scheduler/scheduler_logic.hpp"

#include <nlohmann/json.hpp>

#include "libs/auth/token.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/runtime/commit_ticket.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "libs/store/database.hpp"
#include "libs/store/group_commit.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "services/scheduler/node_repo.hpp"

#include <stdexcept>

namespace loom::scheduler {
namespace {
using namespace loom::runtime;

std::uint64_t to_ns(time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

handled store_failed(const error& e) {
  return fail(e.code == errc::not_found ? e.code : errc::unavailable, "state store: " + e.message);
}

// A refusal of the request itself passes through; anything else came from the store.
handled refused_or_store(const error& e) {
  switch (e.code) {
    case errc::invalid_argument: case errc::not_found: case errc::permission_denied: case errc::conflict:
      return fail(e);
    default:
      return fail(errc::unavailable, "state store: " + e.message);
  }
}

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
                                 job_manager::event_sink on_job_event, std::chrono::milliseconds min_runtime,
                                 std::unique_ptr<store::database> writer)
    : db_(db), now_(std::move(now)), jobs_(db, std::move(jobs_root), min_runtime) {
  jobs_.set_event_sink(std::move(on_job_event));
  if (writer) {
    writer_ = std::make_unique<store::group_commit>(std::move(writer));
    jobs_.set_async_writer([this](job_manager::unit u) { enqueue(std::move(u)); });
  }
  if (!db_) return;
  auto nodes = db_->with_read_transaction([](store::transaction& tx) { return load_nodes(tx); });
  if (!nodes) throw std::runtime_error("cannot load the roster: " + nodes.err().to_string());
  for (auto& n : *nodes) roster_.restore(std::move(n));
  if (auto st = jobs_.load(roster_, now_()); !st) throw std::runtime_error("cannot load the jobs: " + st.err().to_string());
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

handled scheduler_logic::handle(const std::string& type, const std::string& body, const call_context& ctx) {
  {
    std::lock_guard lk(failure_mu_);
    if (commit_failure_)  // memory is ahead of the store: restart from what it kept
      throw std::runtime_error("state store: a group commit failed (" + *commit_failure_ + "); reloading");
  }
  handled h = dispatch(type, body, ctx);
  if (current_) h.durable = current_->ticket;
  finish_batch();
  return h;
}

handled scheduler_logic::dispatch(const std::string& type, const std::string& body, const call_context& ctx) {
  if (is<loom::v1::RegisterNodeRequest>(type)) return register_node(body);
  if (is<loom::v1::NodeHeartbeatRequest>(type)) {
    auto req = parse_as<loom::v1::NodeHeartbeatRequest>(body);
    if (!req) return fail(req.err());
    loom::v1::NodeHeartbeatReply rep;
    auto now = now_();
    rep.set_known(roster_.heartbeat(req->node().value(), now));
    if (rep.known()) seen_[req->node().value()] = now;
    return reply(rep);
  }
  if (is<loom::v1::ListNodesRequest>(type)) return list_nodes(body);
  if (is<loom::v1::DrainNodeRequest>(type)) return drain_node(body);
  if (is<loom::v1::PollWorkRequest>(type)) return poll_work(body);
  if (is<loom::v1::SubmitJobRequest>(type)) return submit_job(body, ctx);
  if (is<loom::v1::ListJobsRequest>(type)) return list_jobs(body, ctx);
  if (is<loom::v1::GetJobRequest>(type)) return get_job(body, ctx);
  if (is<loom::v1::CancelJobRequest>(type)) return cancel_job(body, ctx);
  return unknown_type("scheduler", type);
}

namespace {
void to_proto(const job_rec& j, loom::v1::JobInfo* o) {
  o->set_id(j.id);
  o->set_name(j.name);
  o->set_template_name(j.template_name);
  o->set_state(j.state);
  o->set_tenant(j.tenant);
  o->set_priority_class(j.priority_class);
  o->set_zone(j.zone);
  o->set_submitted_unix_ns(static_cast<std::uint64_t>(j.submitted_ns));
  o->set_updated_unix_ns(static_cast<std::uint64_t>(j.updated_ns));
  o->set_message(j.message);
  o->set_principal(j.principal);
  o->set_out_dir(j.out_dir);
  for (const auto& s : j.stages) {
    auto* p = o->add_stages();
    p->set_name(s.name);
    p->set_state(s.state);
    p->set_step(s.step);
    p->set_total_steps(s.total_steps);
    p->set_loss(s.loss);
    p->set_first_loss(s.first_loss);
    p->set_tokens_per_s(s.tokens_per_s);
    p->set_node(s.node);
    p->set_checkpoint(s.checkpoint);
    p->set_attempts(s.attempts);
    p->set_started_unix_ns(static_cast<std::uint64_t>(s.started_ns));
    p->set_finished_unix_ns(static_cast<std::uint64_t>(s.finished_ns));
    for (const auto& m : s.members) p->add_members(m);
    p->set_min_trainers(s.min_trainers);
    p->set_max_trainers(s.max_trainers);
    p->set_generation(s.generation);
    p->set_memory_bytes(s.memory_bytes);
  }
}
}  // namespace

void scheduler_logic::describe(const job_rec& j, loom::v1::JobInfo* o) const {
  to_proto(j, o);
  for (std::size_t i = 0; i < j.stages.size(); ++i) o->mutable_stages(static_cast<int>(i))->set_waiting(jobs_.waiting(j, i, roster_, now_()));
}

handled scheduler_logic::submit_job(const std::string& body, const call_context& ctx) {
  auto req = parse_as<loom::v1::SubmitJobRequest>(body);
  if (!req) return fail(req.err());
  submit_args a;
  a.template_name = req->template_name();
  a.template_toml = req->template_toml();
  a.overrides.assign(req->overrides().begin(), req->overrides().end());
  a.priority_class = req->priority_class();
  a.tenant = req->tenant();
  if (!a.tenant.empty())
    if (auto st = auth::validate_name("tenant", a.tenant); !st) return fail(st.err());
  a.zone = req->zone();
  auto r = jobs_.submit(a, caller_of(ctx, body), roster_, now_());
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

handled scheduler_logic::list_jobs(const std::string& body, const call_context& ctx) {
  auto req = parse_as<loom::v1::ListJobsRequest>(body);
  if (!req) return fail(req.err());
  if (!known_state(req->state()))
    return fail(errc::invalid_argument, "ListJobs: state " + req->state() +
                                            " is not one of queued, running, succeeded, failed, cancelled");
  loom::v1::ListJobsReply rep;
  for (const job_rec* j : jobs_.list(req->state(), caller_of(ctx, body))) describe(*j, rep.add_jobs());
  return reply(rep);
}

handled scheduler_logic::get_job(const std::string& body, const call_context& ctx) {
  auto req = parse_as<loom::v1::GetJobRequest>(body);
  if (!req) return fail(req.err());
  auto found = jobs_.find_for(req->id(), caller_of(ctx, body));
  if (!found) return fail(found.err());
  const job_rec* j = *found;
  loom::v1::GetJobReply rep;
  describe(*j, rep.mutable_job());
  auto evs = jobs_.events(req->id(), req->events_after());
  if (!evs) return store_failed(evs.err());
  for (const auto& e : *evs) {
    auto* p = rep.add_events();
    p->set_seq(e.seq);
    p->set_unix_ns(static_cast<std::uint64_t>(e.unix_ns));
    p->set_stage(e.stage);
    p->set_kind(e.kind);
    p->set_text(e.text);
  }
  return reply(rep);
}

handled scheduler_logic::cancel_job(const std::string& body, const call_context& ctx) {
  auto req = parse_as<loom::v1::CancelJobRequest>(body);
  if (!req) return fail(req.err());
  auto j = jobs_.cancel(req->id(), req->reason(), caller_of(ctx, body), now_());
  if (!j) return refused_or_store(j.err());
  loom::v1::CancelJobReply rep;
  describe(**j, rep.mutable_job());
  auto h = reply(rep);
  h.audit_job_id = (*j)->id;
  h.audit_payload = nlohmann::json{{"reason", req->reason()}}.dump();
  return h;
}

handled scheduler_logic::poll_work(const std::string& body) {
  auto req = parse_as<loom::v1::PollWorkRequest>(body);
  if (!req) return fail(req.err());
  poll_report r;
  r.node = req->node().value();
  r.state = req->state();
  r.job = req->job();
  r.stage = req->stage();
  r.attempt = req->attempt();
  r.step = req->step();
  r.total_steps = req->total_steps();
  r.loss = req->loss();
  r.first_loss = req->first_loss();
  r.tokens_per_s = req->tokens_per_s();
  r.checkpoint = req->checkpoint();
  r.message = req->message();
  r.generation = req->generation();
  r.peer_endpoint = req->peer_endpoint();
  r.peer_public_key = req->peer_public_key();
  for (const auto& n : req->notices()) r.notices.push_back({n.seq(), n.kind(), n.text()});
  if (!roster_.find(r.node)) return fail(errc::not_found, "node " + r.node + " is not registered");
  roster_.heartbeat(r.node, now_());
  auto a = jobs_.poll(r, now_());
  loom::v1::PollWorkReply rep;
  rep.set_stop(a.stop);
  rep.set_notices_acked(a.notices_acked);
  if (a.work) {
    auto* w = rep.mutable_assignment();
    w->set_job(a.work->job);
    w->set_stage(a.work->stage);
    w->set_config_toml(a.work->config_toml);
    w->set_out_dir(a.work->out_dir);
    w->set_init_from(a.work->init_from);
    w->set_attempt(a.work->attempt);
    w->set_rank(a.work->rank);
    w->set_world(a.work->world);
    w->set_generation(a.work->generation);
    for (const auto& p : a.work->peers) {
      auto* q = w->add_peers();
      q->set_node(p.node);
      q->set_endpoint(p.endpoint);
      q->set_public_key(p.public_key);
    }
  }
  return reply(rep);
}

handled scheduler_logic::register_node(const std::string& body) {
  auto req = parse_as<loom::v1::RegisterNodeRequest>(body);
  if (!req) return fail(req.err());
  if (req->node().value().empty()) return fail(errc::invalid_argument, "RegisterNode: node id is empty");
  node n;
  n.id = req->node().value();
  n.service = req->service();
  n.zone = req->zone();
  n.resources = {req->resources().cpu_cores(), req->resources().gpus(), req->resources().memory_bytes(),
                 req->resources().disk_bytes(), req->resources().gpu_model()};
  n.endpoint = req->endpoint();
  n.pid = req->pid();
  n.version = req->version();
  n.registered = n.last_seen = now_();
  // Written first, applied second: a failed write leaves the roster as it was.
  if (auto st = persist([&](store::transaction& tx) { return upsert_node(tx, n); }); !st) return store_failed(st.err());
  roster_.register_node(std::move(n), now_());
  loom::v1::RegisterNodeReply rep;
  rep.set_roster_version(roster_.version());
  rep.set_heartbeat_interval_ms(static_cast<std::uint32_t>(roster_.interval().count()));
  return reply(rep);
}

handled scheduler_logic::list_nodes(const std::string& body) {
  auto req = parse_as<loom::v1::ListNodesRequest>(body);
  if (!req) return fail(req.err());
  loom::v1::ListNodesReply rep;
  auto now = now_();
  for (const auto& n : roster_.list(req->zone())) {
    auto* o = rep.add_nodes();
    o->mutable_node()->set_value(n.id);
    o->set_service(n.service);
    o->set_zone(n.zone);
    auto* r = o->mutable_resources();
    r->set_cpu_cores(n.resources.cpu_cores);
    r->set_gpus(n.resources.gpus);
    r->set_memory_bytes(n.resources.memory_bytes);
    r->set_disk_bytes(n.resources.disk_bytes);
    r->set_gpu_model(n.resources.gpu_model);
    o->set_endpoint(n.endpoint);
    o->set_pid(n.pid);
    o->set_registered_unix_ns(to_ns(n.registered));
    o->set_last_seen_unix_ns(to_ns(n.last_seen));
    o->set_state(n.draining ? "draining" : to_string(roster_.state(n, now)));
    o->set_version(n.version);
  }
  rep.set_roster_version(roster_.version());
  return reply(rep);
}

handled scheduler_logic::drain_node(const std::string& body) {
  auto req = parse_as<loom::v1::DrainNodeRequest>(body);
  if (!req) return fail(req.err());
  const auto& id = req->node().value();
  if (!roster_.find(id)) return fail(errc::not_found, "no node " + id + " in the roster");
  if (auto st = persist([&](store::transaction& tx) { return set_draining(tx, id); }); !st) return store_failed(st.err());
  roster_.drain(id);
  return reply(loom::v1::DrainNodeReply{});
}

void scheduler_logic::on_tick() {
  jobs_.tick(roster_, now_());
  finish_batch();  // tick's writes have no caller waiting
  auto gone = roster_.reap(now_(), std::chrono::minutes(1));
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

}  // namespace loom::scheduler
