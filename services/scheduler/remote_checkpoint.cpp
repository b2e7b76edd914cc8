#include "services/scheduler/remote_checkpoint.hpp"

#include "libs/ckpt/snapshot.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/scheduler/jobs/job_manager.hpp"

#include <filesystem>

namespace loom::scheduler {

bool inspect_here(const std::string& dir, const layout::endpoints& eps) {
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) || eps.runs_here("aggregator");
}

checkpoint_inspector choosing_inspector(checkpoint_inspector local, checkpoint_inspector remote, endpoints_source eps) {
  return [local = std::move(local), remote = std::move(remote), eps = std::move(eps)](const std::string& dir) {
    return inspect_here(dir, eps()) ? local(dir) : remote(dir);
  };
}

manifest_checker choosing_check(manifest_checker local, checkpoint_inspector remote, endpoints_source eps) {
  return [local = std::move(local), remote = std::move(remote),
          eps = std::move(eps)](const std::string& dir) -> status {
    if (inspect_here(dir, eps())) return local(dir);
    auto facts = remote(dir);
    if (!facts) return facts.err();
    return ok_status();
  };
}

endpoints_source current_endpoints(runtime::service_env& env) {
  return [&env] {
    auto eps = layout::read_endpoints(env.paths.endpoints());
    return eps ? *eps : env.eps;
  };
}

checkpoint_inspector aggregator_inspector(runtime::service_env& env, bool manifest_only) {
  return [&env, manifest_only](const std::string& dir) -> result<checkpoint_facts> {
    auto eps = layout::read_endpoints(env.paths.endpoints());
    const auto* agg = eps ? eps->find("aggregator") : env.eps.find("aggregator");
    if (!agg || agg->rpc.empty())
      return make_error(errc::unavailable, "checkpoint " + dir +
                                               " is not on this host and no aggregator is listed in endpoints.json "
                                               "to inspect it");
    const std::string at = "the aggregator at " + agg->rpc;
    auto key = wire::load_public_key(env.paths.curve_dir(), "aggregator");
    if (!key) return make_error(key.code(), at + ": its public key: " + key.err().message);
    wire::client cli(*env.ctx, agg->rpc, *key, env.keys, wire::client_options{remote_inspect_timeout, 0});
    loom::v1::InspectCheckpointRequest q;
    q.set_checkpoint(dir);
    q.set_manifest_only(manifest_only);
    auto rep = wire::call_typed<loom::v1::InspectCheckpointReply>(cli, q, env.service_token());
    if (!rep) return make_error(rep.code(), at + ": " + rep.err().message);
    const auto step = ckpt::parse_step_dir(std::filesystem::path(dir).filename().string());
    if (!step || *step != rep->step())
      return make_error(errc::corruption, at + " describes step " + std::to_string(rep->step()) + " for checkpoint " +
                                              dir);
    return checkpoint_facts{rep->step(), rep->manifest_sha256(), rep->params_sha256(),
                            std::map<std::string, double>(rep->eval().begin(), rep->eval().end())};
  };
}

checkpoint_inspector split_cloud_inspector(runtime::service_env& env) {
  return choosing_inspector(verifying_inspector(env.paths.checkpoint_key()), aggregator_inspector(env),
                            current_endpoints(env));
}

manifest_checker split_cloud_check(runtime::service_env& env) {
  return choosing_check(manifest_check(env.paths.checkpoint_key()), aggregator_inspector(env, true),
                        current_endpoints(env));
}

}  // namespace loom::scheduler
