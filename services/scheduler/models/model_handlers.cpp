// The scheduler's model-registry requests (issue 16 items 5-7): list, show,
// diff, rollback and the export record, and the hook that registers each
// succeeded stage. Part of scheduler_logic; runs on the service actor's
// thread. The gateway audits each mutating request; a rollback's payload
// names the version, the one it replaced and the reason; an export record's
// names the version, format, output, its hash, every check's outcome, any
// compliance override with its reason (admin only) and the caller the
// trainer ran it for.
// Tenants (issue 24 item 6): every request sees the caller's tenant's
// versions only (admins: every tenant's); another tenant's version answers
// not_found. ResolveModelVersion and RecordModelExport come from this
// deployment's trainer key only (checks and exports run there, issue 25
// item 3): they carry the caller the trainer verified, whose scope applies.
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/store_replies.hpp"

#include "libs/auth/identity.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/models.pb.h"
#include "services/scheduler/models/model_registry.hpp"

#include <nlohmann/json.hpp>

namespace loom::scheduler {
namespace {
using namespace loom::runtime;

handled no_models() { return fail(errc::unimplemented, "this scheduler keeps no model registry (no state store)"); }

constexpr std::uint32_t max_list = 10000;

model_scope scope_of(const call_context& ctx) { return {ctx.tenant.empty() ? "default" : ctx.tenant, ctx.role == "admin"}; }

// The requests a trainer sends on a caller's behalf: only this deployment's
// own trainer key may (a client, a site's trainer, any other service: refused
// whatever its token's role), and the caller must be named.
result<model_scope> trainer_on_behalf(const std::string& type, const call_context& ctx,
                                      const loom::v1::ModelCaller& caller) {
  const auto p = auth::parse_peer(ctx.peer);
  if (p.kind != auth::peer_kind::own_service || p.service != "trainer")
    return make_error(errc::permission_denied,
                      type + " is sent only by this deployment's trainers (CURVE key \"trainer\"), which run model "
                             "checks and exports; this call came with key \"" + ctx.peer +
                             "\": use `loom model check|export`");
  if (caller.tenant().empty() || caller.role().empty() || caller.principal().empty())
    return make_error(errc::invalid_argument, type + ": no caller (principal, role, tenant) named");
  return model_scope{caller.tenant(), caller.role() == "admin"};
}

nlohmann::json caller_json(const loom::v1::ModelCaller& c) {
  return {{"principal", c.principal()}, {"role", c.role()}, {"tenant", c.tenant()}, {"peer", c.peer()}};
}

// What an export record must hold to be stored (the trainer ran the checks).
status check_export_record(const loom::v1::RecordModelExportRequest& r, const std::string& role) {
  auto bad = [](const std::string& why) { return make_error(errc::invalid_argument, "RecordModelExport: " + why); };
  if (r.version().empty()) return bad("no version");
  const bool is_check = r.action() == "check", is_export = r.action() == "export";
  if (!is_check && !is_export) return bad("action must be check or export, got \"" + r.action() + "\"");
  if (is_check && r.outcome() != "passed" && r.outcome() != "failed")
    return bad("a check's outcome is passed or failed, got \"" + r.outcome() + "\"");
  if (is_export && r.outcome() != "exported" && r.outcome() != "refused")
    return bad("an export's outcome is exported or refused, got \"" + r.outcome() + "\"");
  if (is_export && r.format() != "hf" && r.format() != "gguf") return bad("format must be hf or gguf");
  if (r.checks_size() == 0) return bad("no checks: an export is recorded with the checks it passed");
  bool compliance_overridden = false;
  for (const auto& c : r.checks()) {
    if (c.status() != "pass" && c.status() != "fail" && c.status() != "not_assessed" && c.status() != "overridden")
      return bad("check " + c.name() + " has status \"" + c.status() + "\"");
    if (c.status() == "overridden" && c.name() != "compliance") return bad("only compliance may be overridden");
    if (c.status() == "fail" && (r.outcome() == "exported" || r.outcome() == "passed"))
      return bad("outcome " + r.outcome() + " with the failed check " + c.name());
    compliance_overridden = compliance_overridden || c.status() == "overridden";
  }
  if (compliance_overridden && !r.override_compliance()) return bad("a check says overridden but no override was asked");
  if (r.override_compliance()) {
    if (role != "admin")
      return make_error(errc::permission_denied,
                        "overriding the compliance check needs the admin role (this token's role: " + role + ")");
    if (r.reason().empty()) return bad("a compliance override needs a reason (--reason TEXT)");
  }
  return ok_status();
}
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
  o->set_tenant(v.tenant);
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
  for (const auto& [d, h] : v.data_sha256) (*o->mutable_data_sha256())[d] = h;
  o->set_tokenizer(v.tokenizer);
  for (const auto& [k, x] : v.metrics) (*o->mutable_metrics())[k] = x;
  o->set_created_unix_ns(v.created_ns > 0 ? static_cast<std::uint64_t>(v.created_ns) : 0);
  o->set_current(current);
  o->set_config_toml(v.config_toml);
}

handled scheduler_logic::list_models(const loom::v1::ListModelsRequest& req, const call_context& ctx) {
  if (!models_) return no_models();
  if (req.limit() > max_list) return fail(errc::invalid_argument, "ListModels: limit is at most 10000");
  const auto scope = scope_of(ctx);
  auto all = models_->list(scope, req.model(), req.limit() ? req.limit() : max_list);
  if (!all) return refused_or_store(all.err());
  auto current = models_->current_versions(scope);
  if (!current) return refused_or_store(current.err());
  loom::v1::ListModelsReply rep;
  for (const auto& v : *all) describe(v, current->count(v.version) > 0, rep.add_versions());
  return reply(rep);
}

handled scheduler_logic::get_model(const loom::v1::GetModelRequest& req, const call_context& ctx) {
  if (!models_) return no_models();
  if (req.version().empty()) return fail(errc::invalid_argument, "GetModel: the version is empty");
  auto v = models_->get(scope_of(ctx), req.version());
  if (!v) return refused_or_store(v.err());
  auto cur = models_->is_current(*v);
  if (!cur) return refused_or_store(cur.err());
  loom::v1::GetModelReply rep;
  describe(*v, *cur, rep.mutable_version());
  return reply(rep);
}

handled scheduler_logic::diff_models(const loom::v1::DiffModelsRequest& req, const call_context& ctx) {
  if (!models_) return no_models();
  const auto scope = scope_of(ctx);
  auto a = models_->get(scope, req.a());
  if (!a) return refused_or_store(a.err());
  auto b = models_->get(scope, req.b());
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
  const auto scope = scope_of(ctx);
  auto previous = models_->rollback(scope, req.version(), ctx.principal, req.reason());
  if (!previous) return refused_or_store(previous.err());
  auto v = models_->get(scope, req.version());
  if (!v) return refused_or_store(v.err());
  loom::v1::RollbackModelReply rep;
  describe(*v, true, rep.mutable_current());
  rep.set_previous(*previous);
  auto h = reply(rep);
  h.audit_job_id = v->job_id;
  h.audit_payload = nlohmann::json{{"model", v->model}, {"tenant", v->tenant}, {"version", v->version},
                                   {"previous", *previous}, {"params_sha256", v->params_sha256},
                                   {"reason", req.reason()}}
                        .dump();
  return h;
}

handled scheduler_logic::resolve_model_version(const loom::v1::ResolveModelVersionRequest& req,
                                               const call_context& ctx) {
  if (!models_) return no_models();
  auto scope = trainer_on_behalf("ResolveModelVersion", ctx, req.caller());
  if (!scope) return fail(scope.err());
  if (req.version().empty()) return fail(errc::invalid_argument, "ResolveModelVersion: the version is empty");
  auto chain = models_->lineage(*scope, req.version());
  if (!chain) return refused_or_store(chain.err());
  auto cur = models_->is_current(chain->front());
  loom::v1::ResolveModelVersionReply rep;
  describe(chain->front(), cur.ok() && *cur, rep.mutable_version());
  for (std::size_t i = 1; i < chain->size(); ++i) describe((*chain)[i], false, rep.add_ancestors());
  return reply(rep);
}

handled scheduler_logic::record_model_export(const loom::v1::RecordModelExportRequest& req,
                                             const call_context& ctx) {
  if (!models_) return no_models();
  auto scope = trainer_on_behalf("RecordModelExport", ctx, req.caller());
  if (!scope) return fail(scope.err());
  if (auto st = check_export_record(req, req.caller().role()); !st) return fail(st.err());
  auto v = models_->get(*scope, req.version());
  if (!v) return refused_or_store(v.err());
  auto cur = models_->is_current(*v);
  loom::v1::RecordModelExportReply rep;
  describe(*v, cur.ok() && *cur, rep.mutable_version());
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : req.checks())
    checks.push_back({{"name", c.name()}, {"status", c.status()}, {"detail", c.detail()}});
  auto h = reply(rep);
  h.audit_job_id = v->job_id;
  h.audit_payload = nlohmann::json{{"model", v->model},          {"tenant", v->tenant},
                                   {"version", v->version},      {"params_sha256", v->params_sha256},
                                   {"action", req.action()},     {"outcome", req.outcome()},
                                   {"format", req.format()},     {"type", req.type()},
                                   {"out", req.out()},           {"output_sha256", req.output_sha256()},
                                   {"output_bytes", req.output_bytes()}, {"checks", checks},
                                   {"override_compliance", req.override_compliance()}, {"reason", req.reason()},
                                   {"caller", caller_json(req.caller())}, {"export_id", req.export_id()},
                                   {"trainer", ctx.principal}}
                        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return h;
}

}  // namespace loom::scheduler
