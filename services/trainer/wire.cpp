#include "services/trainer/wire.hpp"

#include "loom/v1/jobs.pb.h"
#include "loom/v1/trainer.pb.h"

#include <algorithm>

namespace loom::trainer {

assigned_stage from_wire(const loom::v1::Assignment& a) {
  assigned_stage s;
  s.job = a.job();
  s.tenant = a.tenant();
  s.stage = a.stage();
  s.config_toml = a.config_toml();
  s.out_dir = a.out_dir();
  s.init_from = a.init_from();
  s.attempt = a.attempt();
  s.rank = a.rank();
  s.world = std::max<std::uint32_t>(1, a.world());
  s.generation = a.generation();
  s.stop_at = a.stop_at_step();
  s.eval_text = a.eval_text();
  s.aggregation_grant = a.aggregation_grant();
  for (const auto& p : a.peers()) s.peers.push_back({p.endpoint(), p.public_key()});
  return s;
}

void to_wire(const poll_facts& f, loom::v1::PollWorkRequest* out) {
  out->mutable_node()->set_value(f.node);
  if (!f.inbox_endpoint.empty()) {
    out->set_peer_endpoint(f.inbox_endpoint);
    out->set_peer_public_key(f.inbox_key);
  }
  out->set_state(f.report);
  auto* p = out->mutable_pressure();
  p->set_level(f.pressure.level);
  p->set_why(f.pressure.why);
  p->set_memory(f.pressure.memory);
  p->set_cpu(f.pressure.cpu);
  if (!f.holding) return;
  const work_view& v = *f.holding;
  out->set_job(v.job);
  out->set_stage(v.stage);
  out->set_attempt(v.attempt);
  out->set_step(v.step);
  out->set_total_steps(v.total_steps);
  out->set_loss(v.loss);
  out->set_first_loss(v.first_loss);
  out->set_tokens_per_s(v.tokens_per_s);
  out->set_checkpoint(v.checkpoint);
  out->set_message(v.message);
  out->set_generation(v.generation);
  out->set_val_loss(v.val_loss);
  out->set_val_step(v.val_step);
  out->set_precision(v.precision);
  if (!v.site.site.empty()) {
    auto p = v.site;
    p.step = v.step;
    p.loss = v.loss;
    diloco::to_proto(p, out->mutable_site());
  }
  for (const auto& c : v.contributed) out->add_contributed_sites(c);
  for (const auto& m : v.missing) out->add_missing_sites(m);
  for (const auto& n : f.notices) {
    auto* q = out->add_notices();
    q->set_seq(n.seq);
    q->set_kind(n.kind);
    q->set_text(n.text);
  }
}

void to_wire(const work_view& v, loom::v1::TrainerStatusReply* out) {
  out->set_state(std::string(to_string(v.phase)));
  out->mutable_job()->set_value(v.job);
  out->set_stage(v.stage);
  out->set_outcome(v.outcome);
  out->set_attempt(v.attempt);
  out->set_step(v.step);
  out->set_total_steps(v.total_steps);
  out->set_loss(v.loss);
  out->set_tokens_per_s(v.tokens_per_s);
  out->set_rank(v.rank);
  out->set_world(v.world);
  out->set_generation(v.generation);
  out->set_checkpoint(v.checkpoint);
  out->set_message(v.message);
  out->set_precision(v.precision);
  out->set_isolation(v.isolation);
  out->set_pressure(v.pressure);
  out->set_memory_used(v.memory_used);
}

}  // namespace loom::trainer
