#include "services/scheduler/dataset_probe.hpp"

#include "libs/layout/layout.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/ingest.pb.h"

#include <chrono>

namespace loom::scheduler {

// Long enough for an ingest busy importing (its actor answers between
// batches), short enough that a stopped ingest does not hold the scheduler.
constexpr std::chrono::milliseconds probe_timeout{2000};

dataset_probe ingest_probe(runtime::service_env& env) {
  return [&env](const std::string& tenant, const std::string& name) -> status {
    auto eps = layout::read_endpoints(env.paths.endpoints());
    const auto* ingest = eps ? eps->find("ingest") : env.eps.find("ingest");
    if (!ingest || ingest->rpc.empty())
      return make_error(errc::unavailable, "data.dataset " + name + ": no ingest service in this deployment to ask");
    auto key = wire::load_public_key(env.paths.curve_dir(), "ingest");
    if (!key) return key.err();
    wire::client cli(*env.ctx, ingest->rpc, *key, env.keys, wire::client_options{probe_timeout, 0});
    loom::v1::DatasetStatusRequest q;
    q.set_name(name);
    q.set_for_tenant(tenant);
    auto st = wire::call_typed<loom::v1::DatasetStatusReply>(cli, q, env.service_token());
    if (!st && st.code() == errc::not_found)
      return make_error(errc::not_found, "data.dataset " + name + ": ingest has no dataset " + name +
                                             " (`loom data list` shows them; `loom data import PATH --dataset " + name +
                                             "` makes it)");
    if (!st)
      return make_error(errc::unavailable, "data.dataset " + name + ": cannot ask ingest about it: " + st.err().message);
    if (st->dataset().state() != "ready")
      return make_error(errc::conflict, "data.dataset " + name + " is " + st->dataset().state() + ", not ready" +
                                            (st->dataset().reason().empty() ? "" : ": " + st->dataset().reason()));
    return ok_status();
  };
}

}  // namespace loom::scheduler
