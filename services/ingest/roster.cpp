#include "services/ingest/roster.hpp"

#include "libs/runtime/service.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/scheduler.pb.h"

#include <algorithm>

namespace loom::ingest {

status check_nodes(const std::vector<std::string>& asked, const std::vector<std::string>& known) {
  for (const auto& n : asked) {
    if (std::find(known.begin(), known.end(), n) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return make_error(errc::invalid_argument, "unknown node '" + n + "' in nodes: the trainer nodes of this deployment are " +
                                                  (list.empty() ? "(none registered)" : list) +
                                                  " (`loom status` lists them)");
  }
  return ok_status();
}

result<std::vector<std::string>> trainer_nodes(runtime::service_env& env, const std::string& zone) {
  auto eps = layout::read_endpoints(env.paths.endpoints());  // fresh: the scheduler may have moved
  const auto* sched = eps ? eps->find("scheduler") : env.eps.find("scheduler");
  auto key = wire::load_public_key(layout::reach(env.paths, eps ? *eps : env.eps, "scheduler").key_dir, "scheduler");
  if (!sched || sched->rpc.empty() || !key)
    return make_error(errc::unavailable, "cannot check nodes: no scheduler endpoint or key in " + env.paths.root);
  wire::client cli(*env.ctx, (eps ? *eps : env.eps).rpc_targets("scheduler"), *key, env.keys,
                   wire::client_options{std::chrono::milliseconds(1000), 0});
  auto rep = wire::call_typed<loom::v1::ListNodesReply>(cli, loom::v1::ListNodesRequest{}, runtime::token_for(env, "scheduler"));
  if (!rep)
    return make_error(errc::unavailable,
                      "cannot check nodes against the scheduler's roster at " + sched->rpc + ": " + rep.err().message);
  std::vector<std::string> out;
  for (const auto& n : rep->nodes())
    if (n.service() == "trainer" && (zone.empty() || n.zone() == zone)) out.push_back(n.node().value());
  return out;
}

}  // namespace loom::ingest
