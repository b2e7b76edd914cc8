#include "services/aggregator/aggregator_logic.hpp"

#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/checkpoint_inspect.hpp"
#include "services/aggregator/engine.hpp"
#include "services/aggregator/wire.hpp"

#include <chrono>

namespace loom::aggregator {

namespace {
// A request without the grant field is malformed (as one without a spec); a
// grant that does not verify, or the wrong caller, is permission_denied.
error no_grant(const char* what) {
  return make_error(errc::invalid_argument, std::string(what) +
                                                " carries no aggregation grant: an aggregation exists only for a "
                                                "diloco stage the scheduler placed, and only its sites' trainers "
                                                "hold the grant");
}
}  // namespace

aggregator_logic::aggregator_logic(std::shared_ptr<engine> jobs, delta_endpoint where, std::string data_dir)
    : jobs_(std::move(jobs)), where_(std::move(where)), data_dir_(std::move(data_dir)) {
  using namespace loom::v1;
  // Jobs, their rounds per fragment and counters, scoped to the caller's tenant (viewer).
  table_.on<AggregatorStatusRequest>(
      [this](const AggregatorStatusRequest& r, const runtime::call_context& ctx) { return status(r, ctx); });
  // Starts a granted DiLoCo aggregation, or answers again for it (a placed site's trainer).
  table_.on<StartAggregationRequest>(
      [this](const StartAggregationRequest& r, const runtime::call_context& ctx) { return start(r, ctx); });
  // A granted stage's end: its global model into the granted stage dir, then retired (a placed site's trainer).
  table_.on<ExportGlobalRequest>(
      [this](const ExportGlobalRequest& r, const runtime::call_context& ctx) { return export_global(r, ctx); });
  // A checkpoint under <data>/jobs verified and described (this deployment's scheduler key only).
  table_.on<InspectCheckpointRequest>(
      [this](const InspectCheckpointRequest& r, const runtime::call_context& ctx) { return inspect(r, ctx); });
}

runtime::handled aggregator_logic::status(const loom::v1::AggregatorStatusRequest&, const runtime::call_context& ctx) {
  loom::v1::AggregatorStatusReply rep;
  jobs_->describe(&rep, ctx.tenant, ctx.role == "admin");
  rep.set_delta_endpoint(where_.endpoint);
  rep.set_public_key(where_.public_key);
  return runtime::reply(rep);
}

runtime::handled aggregator_logic::start(const loom::v1::StartAggregationRequest& req, const runtime::call_context& ctx) {
  auto spec = from_wire(req.spec());
  if (!spec) return runtime::fail(spec.err());
  if (!req.has_grant()) return runtime::fail(no_grant("StartAggregation"));
  const auto now = std::chrono::duration_cast<nanos>(std::chrono::steady_clock::now().time_since_epoch());
  auto s = jobs_->start(*spec, req.grant(), ctx.peer, now);
  if (!s) return runtime::fail(s.err());
  loom::v1::StartAggregationReply rep;
  rep.set_job(spec->job);
  rep.set_delta_endpoint(where_.endpoint);
  rep.set_public_key(where_.public_key);
  for (auto v : s->versions) rep.add_versions(v);
  rep.set_resumed(s->resumed);
  rep.set_starting(s->starting);
  auto h = runtime::reply(rep);
  h.audit_job_id = req.grant().job();
  h.audit_payload = "aggregation=" + spec->job + " stage=" + req.grant().stage() + (s->starting ? " starting" : "");
  return h;
}

runtime::handled aggregator_logic::export_global(const loom::v1::ExportGlobalRequest& req,
                                                 const runtime::call_context& ctx) {
  if (!req.has_grant()) return runtime::fail(no_grant("ExportGlobal"));
  auto out = jobs_->export_global(req, ctx.peer);
  if (!out) return runtime::fail(out.err());
  loom::v1::ExportGlobalReply rep;
  rep.set_snapshot(out->snapshot);
  for (const auto& s : out->contributed) rep.add_contributed(s);
  for (const auto& s : out->missing) rep.add_missing(s);
  auto h = runtime::reply(rep);
  h.audit_job_id = req.grant().job();
  h.audit_payload = "aggregation=" + req.grant().spec().job() + " snapshot=" + out->snapshot;
  return h;
}

runtime::handled aggregator_logic::inspect(const loom::v1::InspectCheckpointRequest& req,
                                          const runtime::call_context& ctx) {
  if (auto may = scheduler_only(ctx.peer, ctx.principal); !may) return runtime::fail(may.err());
  auto facts = inspect_checkpoint(data_dir_, req.checkpoint(), req.manifest_only());
  if (!facts) return runtime::fail(facts.err());
  loom::v1::InspectCheckpointReply rep;
  rep.set_step(facts->step);
  rep.set_manifest_sha256(facts->manifest_sha256);
  rep.set_params_sha256(facts->params_sha256);
  rep.mutable_eval()->insert(facts->eval.begin(), facts->eval.end());
  return runtime::reply(rep);
}

}  // namespace loom::aggregator
