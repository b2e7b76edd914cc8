#include "services/aggregator/aggregator_logic.hpp"

#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/engine.hpp"
#include "services/aggregator/wire.hpp"

#include <chrono>

namespace loom::aggregator {

aggregator_logic::aggregator_logic(std::shared_ptr<engine> jobs, delta_endpoint where)
    : jobs_(std::move(jobs)), where_(std::move(where)) {
  using namespace loom::v1;
  // Jobs, their rounds per fragment and counters (viewer).
  table_.on<AggregatorStatusRequest>(
      [this](const AggregatorStatusRequest& r, const runtime::call_context&) { return status(r); });
  // Starts a DiLoCo aggregation, or answers again for the same spec (operator).
  table_.on<StartAggregationRequest>(
      [this](const StartAggregationRequest& r, const runtime::call_context&) { return start(r); });
  // An edge-site stage's final model into the cloud's stage dir (operator).
  table_.on<ExportGlobalRequest>([this](const ExportGlobalRequest& r, const runtime::call_context&) {
    auto out = jobs_->export_global(r.job(), r.stage_dir(), r.step(), r.trainer_state());
    if (!out) return runtime::fail(out.err());
    loom::v1::ExportGlobalReply rep;
    rep.set_snapshot(*out);
    return runtime::reply(rep);
  });
}

runtime::handled aggregator_logic::status(const loom::v1::AggregatorStatusRequest&) {
  loom::v1::AggregatorStatusReply rep;
  jobs_->describe(&rep);
  rep.set_delta_endpoint(where_.endpoint);
  rep.set_public_key(where_.public_key);
  return runtime::reply(rep);
}

runtime::handled aggregator_logic::start(const loom::v1::StartAggregationRequest& req) {
  auto spec = from_wire(req.spec());
  if (!spec) return runtime::fail(spec.err());
  const auto now = std::chrono::duration_cast<nanos>(std::chrono::steady_clock::now().time_since_epoch());
  auto s = jobs_->start(*spec, now);
  if (!s) return runtime::fail(s.err());
  loom::v1::StartAggregationReply rep;
  rep.set_job(spec->job);
  rep.set_delta_endpoint(where_.endpoint);
  rep.set_public_key(where_.public_key);
  for (auto v : s->versions) rep.add_versions(v);
  rep.set_resumed(s->resumed);
  auto h = runtime::reply(rep);
  h.audit_job_id = spec->job;
  return h;
}

}  // namespace loom::aggregator
