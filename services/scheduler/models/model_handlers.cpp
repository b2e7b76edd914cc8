// The scheduler's model-registry requests (issue 16 item 5): list, show, diff
// and rollback, and the hook that registers each succeeded stage. Part of
// scheduler_logic; runs on the service actor's thread. The gateway audits
// each request; a rollback's payload names the version, the one it replaced
// and the reason.
#include "services/scheduler/scheduler_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/models.pb.h"
#include "services/scheduler/models/model_registry.hpp"

#include <nlohmann/json.hpp>

namespace loom::scheduler {
namespace {
using namespace loom::runtime;

handled no_models() { return fail(errc::unimplemented, "this scheduler keeps no model registry (no state store)"); }

handled refused_or_store(const error& e) {
  switch (e.code) {
    case errc::invalid_argument: case errc::not_found: case errc::permission_denied: case errc::conflict:
    case errc::corruption: case errc::already_exists:
      return fail(e);
    default:
      return fail(errc::unavailable, "state store: " + e.message);
  }
}

constexpr std::uint32_t max_list = 10000;
}  // namespace

void scheduler_logic::set_models(std::unique_ptr<model_registry> models) {
  models_ = std::move(models);
  if (!models_) {
    jobs_.set_stage_succeeded({});
    return;
  }
  jobs_.set_stage_succeeded([this](const job_rec& j, std::size_t i) -> std::pair<std::string, std::string> {
    auto v = models_->register_stage(outcome_of(j, i));
    if (!v) {
      if (v.code() == errc::already_exists) return {"", ""};  // a replayed completion
      return {"model_not_registered", v.err().message};
    }
    return {"model_registered", v->version + " of model " + v->model + " (params sha256 " +
                                    v->params_sha256.substr(0, 16) + "…" +
                                    (v->parent.empty() ? "" : ", parent " + v->parent) + ")"};
  });
}

void scheduler_logic::describe(const model_version_rec& v, bool current, loom::v1::ModelVersion* o) const {
  o->set_version(v.version);
  o->set_model(v.model);
  o->set_job_id(v.job_id);
  o->set_stage(v.stage);
  o->set_kind(v.kind);
  o->set_checkpoint(v.checkpoint);
  o->set_step(v.step);
  o->set_manifest_sha256(v.manifest_sha256);
  o->set_params_sha256(v.params_sha256);
  o->set_parent(v.parent);
  for (const auto& d : v.datasets) o->add_datasets(d);
  o->set_tokenizer(v.tokenizer);
  for (const auto& [k, x] : v.metrics) (*o->mutable_metrics())[k] = x;
  o->set_created_unix_ns(v.created_ns > 0 ? static_cast<std::uint64_t>(v.created_ns) : 0);
  o->set_current(current);
  o->set_config_toml(v.config_toml);
}

handled scheduler_logic::list_models(const loom::v1::ListModelsRequest& req) {
  if (!models_) return no_models();
  if (req.limit() > max_list) return fail(errc::invalid_argument, "ListModels: limit is at most 10000");
  auto all = models_->list(req.model(), req.limit() ? req.limit() : max_list);
  if (!all) return refused_or_store(all.err());
  loom::v1::ListModelsReply rep;
  for (const auto& v : *all) {
    auto cur = models_->is_current(v);
    if (!cur) return refused_or_store(cur.err());
    describe(v, *cur, rep.add_versions());
  }
  return reply(rep);
}

handled scheduler_logic::get_model(const loom::v1::GetModelRequest& req) {
  if (!models_) return no_models();
  if (req.version().empty()) return fail(errc::invalid_argument, "GetModel: the version is empty");
  auto v = models_->get(req.version());
  if (!v) return refused_or_store(v.err());
  auto cur = models_->is_current(*v);
  if (!cur) return refused_or_store(cur.err());
  loom::v1::GetModelReply rep;
  describe(*v, *cur, rep.mutable_version());
  return reply(rep);
}

handled scheduler_logic::diff_models(const loom::v1::DiffModelsRequest& req) {
  if (!models_) return no_models();
  auto a = models_->get(req.a());
  if (!a) return refused_or_store(a.err());
  auto b = models_->get(req.b());
  if (!b) return refused_or_store(b.err());
  auto d = models_->diff(*a, *b);
  if (!d) return refused_or_store(d.err());
  loom::v1::DiffModelsReply rep;
  auto ca = models_->is_current(*a), cb = models_->is_current(*b);
  describe(*a, ca.ok() && *ca, rep.mutable_a());
  describe(*b, cb.ok() && *cb, rep.mutable_b());
  for (const auto& [field, x, y] : *d) {
    auto* o = rep.add_differences();
    o->set_field(field);
    o->set_a(x);
    o->set_b(y);
  }
  return reply(rep);
}

handled scheduler_logic::rollback_model(const loom::v1::RollbackModelRequest& req, const call_context& ctx) {
  if (!models_) return no_models();
  if (req.version().empty()) return fail(errc::invalid_argument, "RollbackModel: the version is empty");
  auto previous = models_->rollback(req.version(), ctx.principal, req.reason());
  if (!previous) return refused_or_store(previous.err());
  auto v = models_->get(req.version());
  if (!v) return refused_or_store(v.err());
  loom::v1::RollbackModelReply rep;
  describe(*v, true, rep.mutable_current());
  rep.set_previous(*previous);
  auto h = reply(rep);
  h.audit_payload = nlohmann::json{{"model", v->model}, {"version", v->version}, {"previous", *previous},
                                   {"params_sha256", v->params_sha256}, {"reason", req.reason()}}
                        .dump();
  return h;
}

}  // namespace loom::scheduler
