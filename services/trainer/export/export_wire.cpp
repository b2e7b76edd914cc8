#include "services/trainer/export/export_wire.hpp"

#include "libs/layout/layout.hpp"
#include "libs/runtime/handler_table.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/models.pb.h"
#include "services/trainer/export/export_job.hpp"

#include <nlohmann/json.hpp>

#include <zmq.hpp>

namespace loom::trainer {
namespace {
using namespace loom::runtime;

export_caller caller_of(const call_context& ctx) {
  return {ctx.principal, ctx.role, ctx.tenant.empty() ? "default" : ctx.tenant, ctx.peer};
}

void to_wire(const export_caller& c, loom::v1::ModelCaller* o) {
  o->set_principal(c.principal);
  o->set_role(c.role);
  o->set_tenant(c.tenant);
  o->set_peer(c.peer);
}

void to_wire(const export_check& k, loom::v1::ModelCheck* o) {
  o->set_name(k.name);
  o->set_status(k.status);
  o->set_detail(k.detail);
  o->set_seconds(k.seconds);
}

void to_wire(const export_info& i, loom::v1::ModelExportInfo* o) {
  o->set_id(i.id);
  o->set_state(i.state);
  o->set_phase(i.phase);
  o->set_action(i.action);
  o->set_version(i.version);
  o->set_model(i.model);
  o->set_checkpoint(i.checkpoint);
  o->set_format(i.format);
  o->set_type(i.type);
  for (const auto& k : i.checks) to_wire(k, o->add_checks());
  o->set_passed(i.passed);
  if (i.error_code != errc::ok) {
    o->mutable_error()->set_code(static_cast<loom::v1::Code>(static_cast<int>(i.error_code)));
    o->mutable_error()->set_message(i.error);
  }
  for (const auto& f : i.files) {
    auto* w = o->add_files();
    w->set_name(f.name);
    w->set_bytes(f.bytes);
    w->set_sha256(f.sha256);
  }
  o->set_output_sha256(i.output_sha256);
  o->set_output_bytes(i.output_bytes);
  o->set_check_seconds(i.check_seconds);
  o->set_export_seconds(i.export_seconds);
  o->set_recorded(i.recorded);
  o->set_trainer(i.trainer);
}

export_request from_wire(const loom::v1::StartModelExportRequest& r) {
  export_request q;
  q.version = r.version();
  q.action = r.action();
  q.format = r.format();
  q.type = r.type();
  q.held_out = r.held_out();
  if (r.max_loss() != 0) q.max_loss = r.max_loss();
  q.override_compliance = r.override_compliance();
  q.reason = r.reason();
  q.out = r.out();
  return q;
}

// Null tasks: an edge site's trainer (or one that could not start them).
handled none_here() {
  return fail(errc::unimplemented,
              "this trainer runs no model checks or exports: they run on the cloud's trainers, on the cloud's data "
              "(ask the cloud: `loom model check|export` with the cloud's endpoints and keys)");
}

// The scheduler, reached with this trainer's key and token (layout::reach:
// at an edge site the cloud's; there the scheduler refuses the site's key).
class scheduler_registry final : public registry_port {
 public:
  explicit scheduler_registry(service_env& env) : env_(env) {}

  result<resolved_version> resolve(const std::string& version, const export_caller& c) override {
    loom::v1::ResolveModelVersionRequest req;
    req.set_version(version);
    to_wire(c, req.mutable_caller());
    auto rep = call<loom::v1::ResolveModelVersionReply>(req, 2);
    if (!rep) return rep.err();
    const auto& v = rep->version();
    resolved_version out;
    out.version = v.version();
    out.tenant = v.tenant();
    out.model = v.model();
    out.checkpoint = v.checkpoint();
    out.params_sha256 = v.params_sha256();
    out.config_toml = v.config_toml();
    out.tokenizer = v.tokenizer();
    out.data.assign(v.datasets().begin(), v.datasets().end());
    out.lineage = out.data;
    for (const auto& a : rep->ancestors()) out.lineage.insert(out.lineage.end(), a.datasets().begin(), a.datasets().end());
    if (rep->ancestors_size() > 0) out.parent_checkpoint = rep->ancestors(0).checkpoint();
    return out;
  }

  status record(const export_record& r, const export_caller& c) override {
    loom::v1::RecordModelExportRequest req;
    req.set_export_id(r.export_id);
    req.set_version(r.version);
    req.set_action(r.action);
    req.set_outcome(r.outcome);
    req.set_format(r.format);
    req.set_type(r.type);
    req.set_out(r.out);
    req.set_output_sha256(r.output_sha256);
    req.set_output_bytes(r.output_bytes);
    for (const auto& k : r.checks) to_wire(k, req.add_checks());
    req.set_override_compliance(r.override_compliance);
    req.set_reason(r.reason);
    to_wire(c, req.mutable_caller());
    // Not retried: a lost reply would record it twice; the export then fails
    // and is deleted, which errs on the side of the audit log.
    auto rep = call<loom::v1::RecordModelExportReply>(req, 0);
    if (!rep) return rep.err();
    return ok_status();
  }

 private:
  template <class Rep, class Req>
  result<Rep> call(const Req& req, int retries) {
    auto eps = layout::read_endpoints(env_.paths.endpoints());  // fresh: the scheduler may have moved
    const auto* sched = eps ? eps->find("scheduler") : env_.eps.find("scheduler");
    if (!sched || sched->rpc.empty())
      return make_error(errc::unavailable, "no scheduler endpoint in " + env_.paths.endpoints());
    auto key = wire::load_public_key(layout::reach(env_.paths, eps ? *eps : env_.eps, "scheduler").key_dir, "scheduler");
    if (!key) return key.err();
    wire::client cli(*env_.ctx, (eps ? *eps : env_.eps).rpc_targets("scheduler"), *key, env_.keys,
                     wire::client_options{std::chrono::seconds(10), retries});
    auto rep = wire::call_typed<Rep>(cli, req, runtime::token_for(env_, "scheduler"));
    if (!rep) return make_error(rep.code(), "scheduler: " + rep.err().message);
    return rep;
  }

  service_env& env_;
};

}  // namespace

void add_export_handlers(handler_table& table, std::shared_ptr<export_tasks> tasks) {
  using namespace loom::v1;
  // Queue a check or an export of a version for the caller (audited: mutating).
  table.on<StartModelExportRequest>([tasks](const StartModelExportRequest& r, const call_context& ctx) {
    if (!tasks) return none_here();
    auto req = from_wire(r);
    auto info = tasks->start(req, caller_of(ctx));
    if (!info) return fail(info.err());
    StartModelExportReply rep;
    to_wire(*info, rep.mutable_info());
    auto h = reply(rep);
    h.audit_payload = nlohmann::json{{"export_id", info->id}, {"version", req.version}, {"action", req.action},
                                     {"format", req.format}, {"type", info->type}, {"held_out", req.held_out},
                                     {"override_compliance", req.override_compliance}, {"reason", req.reason},
                                     {"out", req.out}}
                          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return h;
  });
  // Where a check or an export stands.
  table.on<GetModelExportRequest>([tasks](const GetModelExportRequest& r, const call_context& ctx) {
    if (!tasks) return none_here();
    auto info = tasks->get(r.id(), caller_of(ctx));
    if (!info) return fail(info.err());
    GetModelExportReply rep;
    to_wire(*info, rep.mutable_info());
    return reply(rep);
  });
  // A chunk of a done export's file.
  table.on<FetchModelExportRequest>([tasks](const FetchModelExportRequest& r, const call_context& ctx) {
    if (!tasks) return none_here();
    auto c = tasks->fetch(r.id(), r.file(), r.offset(), r.max_bytes(), caller_of(ctx));
    if (!c) return fail(c.err());
    FetchModelExportReply rep;
    rep.set_data(std::move(c->data));
    rep.set_sha256(c->sha256);
    rep.set_offset(c->offset);
    rep.set_file_bytes(c->file_bytes);
    return reply(rep);
  });
  // Cancel it, or delete its files (audited: mutating).
  table.on<EndModelExportRequest>([tasks](const EndModelExportRequest& r, const call_context& ctx) {
    if (!tasks) return none_here();
    auto info = tasks->end(r.id(), caller_of(ctx));
    if (!info) return fail(info.err());
    EndModelExportReply rep;
    to_wire(*info, rep.mutable_info());
    auto h = reply(rep);
    h.audit_payload = nlohmann::json{{"export_id", info->id}, {"version", info->version}, {"state", info->state}}.dump();
    return h;
  });
}

std::shared_ptr<export_tasks> start_model_exports(service_env& env) {
  if (env.eps.is_site()) return nullptr;
  std::string node;
  for (char ch : env.node_id) node += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.') ? ch : '_';
  export_job_options job;
  job.data_dir = env.paths.root;
  job.jobs_dir = env.paths.jobs();
  job.import_roots = [&env] {
    auto eps = layout::read_endpoints(env.paths.endpoints());  // fresh: the roots of this `loom up`
    return layout::import_roots(env.paths, eps ? *eps : env.eps);
  };
  job.read_roots = [&env] {
    auto eps = layout::read_endpoints(env.paths.endpoints());
    return layout::job_read_roots(env.paths, eps ? *eps : env.eps);
  };
  auto registry = std::make_shared<scheduler_registry>(env);
  export_tasks_options o;
  o.root = env.paths.state("trainer") + "/exports/" + node;
  o.node = env.node_id;
  o.admit = [job](const export_request& r) { return admit_held_out(job, r); };
  return std::make_shared<export_tasks>(
      o, [job, registry](const export_request& r, const export_caller& c, export_context& ctx) {
        return run_model_export(job, *registry, r, c, ctx);
      });
}

}  // namespace loom::trainer
