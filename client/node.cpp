// `loom node drain|undrain NODE [--reason TEXT]`: mark a node of the roster
// draining (it finishes what it runs and is given nothing new) or undo it.
// The scheduler allows the admin, or the node's own site (its site token over
// its own keys); the drain is kept across restarts until undrained, and each
// call is audited there. `loom status` lists the roster with each node's state.
#include "client/cli.hpp"
#include "client/typed_call.hpp"

#include "loom/v1/scheduler.pb.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>

namespace loom::cli {
namespace {

template <class Req, class Rep>
int set_drained(context& c, bool drained) {
  Req req;
  req.mutable_node()->set_value(c.a.positional.at(2));
  req.set_reason(c.a.get_or("reason", ""));
  // Retried with the same request id: a drain (or undrain) done twice is the same.
  auto rep = typed_call<Rep>(c, "scheduler", req, 1);
  if (!rep) return fail(c, rep.err());
  const std::string node = printable(c.a.positional.at(2));
  if (c.json)
    print_json({{"node", c.a.positional.at(2)}, {"draining", drained}});
  else if (drained)
    std::printf("node %s is draining: it finishes what it runs and is given nothing new (until `loom node undrain %s`)\n",
                node.c_str(), node.c_str());
  else
    std::printf("node %s takes work again\n", node.c_str());
  return ok_exit;
}

int cmd_node_drain(context& c) { return set_drained<loom::v1::DrainNodeRequest, loom::v1::DrainNodeReply>(c, true); }
int cmd_node_undrain(context& c) {
  return set_drained<loom::v1::UndrainNodeRequest, loom::v1::UndrainNodeReply>(c, false);
}

}  // namespace

int cmd_node(context& c) {
  static const std::map<std::string, int (*)(context&)> subcommands = {{"drain", cmd_node_drain},
                                                                       {"undrain", cmd_node_undrain}};
  auto it = c.a.positional.size() < 2 ? subcommands.end() : subcommands.find(c.a.positional[1]);
  if (it == subcommands.end()) return usage("usage: loom node drain NODE [--reason TEXT] | undrain NODE [--reason TEXT]");
  return it->second(c);
}

}  // namespace loom::cli
