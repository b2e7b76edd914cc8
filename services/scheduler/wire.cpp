#include "services/scheduler/wire.hpp"

#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"

namespace loom::scheduler {
namespace {
std::uint64_t to_ns(time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}
}  // namespace

void to_wire(const job_rec& j, loom::v1::JobInfo* o) {
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
    p->set_precision(s.precision);
    for (const auto& x : s.sites) diloco::to_proto(x, p->add_sites());
    for (const auto& c : s.contributed) p->add_contributed_sites(c);
    for (const auto& m : s.missing) p->add_missing_sites(m);
    if (s.hpo_best.trial >= 0) {
      auto* b = p->mutable_hpo_best();
      b->set_trial(static_cast<std::uint32_t>(s.hpo_best.trial));
      for (const auto& [key, value] : s.hpo_best.values) {
        auto* v = b->add_values();
        v->set_key(key);
        v->set_value(value);
      }
      b->set_validation_loss(s.hpo_best.validation_loss);
      b->set_step(s.hpo_best.step);
      b->set_checkpoint(s.hpo_best.checkpoint);
      b->set_steps_granted(s.hpo_best.steps_granted);
      b->set_sweep_steps(s.hpo_best.sweep_steps);
    }
  }
}

void to_wire(const job_event& e, loom::v1::JobEvent* p) {
  p->set_seq(e.seq);
  p->set_unix_ns(static_cast<std::uint64_t>(e.unix_ns));
  p->set_stage(e.stage);
  p->set_kind(e.kind);
  p->set_text(e.text);
}

submit_args from_wire(const loom::v1::SubmitJobRequest& r) {
  submit_args a;
  a.template_name = r.template_name();
  a.template_toml = r.template_toml();
  a.overrides.assign(r.overrides().begin(), r.overrides().end());
  a.priority_class = r.priority_class();
  a.tenant = r.tenant();
  a.zone = r.zone();
  return a;
}

poll_report from_wire(const loom::v1::PollWorkRequest& q) {
  poll_report r;
  r.node = q.node().value();
  r.state = q.state();
  r.job = q.job();
  r.stage = q.stage();
  r.attempt = q.attempt();
  r.step = q.step();
  r.total_steps = q.total_steps();
  r.loss = q.loss();
  r.first_loss = q.first_loss();
  r.tokens_per_s = q.tokens_per_s();
  r.checkpoint = q.checkpoint();
  r.message = q.message();
  r.generation = q.generation();
  r.peer_endpoint = q.peer_endpoint();
  r.peer_public_key = q.peer_public_key();
  r.val_loss = q.val_loss();
  r.val_step = q.val_step();
  r.precision = q.precision();
  if (q.has_pressure()) {
    r.pressure_level = q.pressure().level();
    r.pressure_why = q.pressure().why();
  }
  for (const auto& n : q.notices()) r.notices.push_back({n.seq(), n.kind(), n.text()});
  r.contributed.assign(q.contributed_sites().begin(), q.contributed_sites().end());
  r.missing.assign(q.missing_sites().begin(), q.missing_sites().end());
  if (q.has_site()) {
    r.site = diloco::from_proto(q.site());
    r.site.node = q.node().value();
  }
  return r;
}

void to_wire(const poll_answer& a, loom::v1::PollWorkReply* rep) {
  rep->set_stop(a.stop);
  rep->set_notices_acked(a.notices_acked);
  rep->set_refused(a.refused);
  if (!a.work) return;
  auto* w = rep->mutable_assignment();
  w->set_job(a.work->job);
  w->set_stage(a.work->stage);
  w->set_config_toml(a.work->config_toml);
  w->set_out_dir(a.work->out_dir);
  w->set_init_from(a.work->init_from);
  w->set_attempt(a.work->attempt);
  w->set_rank(a.work->rank);
  w->set_world(a.work->world);
  w->set_generation(a.work->generation);
  w->set_stop_at_step(a.work->stop_at);
  w->set_eval_text(a.work->eval_text);
  w->set_tenant(a.work->tenant);
  w->set_aggregation_grant(a.work->aggregation_grant);
  for (const auto& p : a.work->peers) {
    auto* q = w->add_peers();
    q->set_node(p.node);
    q->set_endpoint(p.endpoint);
    q->set_public_key(p.public_key);
  }
}

node from_wire(const loom::v1::RegisterNodeRequest& r) {
  node n;
  n.id = r.node().value();
  n.service = r.service();
  n.zone = r.zone();
  n.resources = {r.resources().cpu_cores(), r.resources().gpus(), r.resources().memory_bytes(),
                 r.resources().disk_bytes(), r.resources().gpu_model()};
  n.endpoint = r.endpoint();
  n.pid = r.pid();
  n.version = r.version();
  return n;
}

void to_wire(const node& n, const std::string& state, loom::v1::NodeInfo* o) {
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
  o->set_state(state);
  o->set_version(n.version);
}

}  // namespace loom::scheduler
