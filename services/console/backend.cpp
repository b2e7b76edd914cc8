#include "services/console/backend.hpp"

#include "libs/wire/client.hpp"
#include "libs/wire/curve.hpp"

#include <google/protobuf/message.h>

namespace loom::console {

// Idle sockets kept per endpoint: enough for the HTTPS workers' concurrency
// without holding hundreds of CURVE sessions open.
constexpr std::size_t max_idle_per_endpoint = 32;

backend::backend(zmq::context_t& ctx, layout::paths p, std::chrono::milliseconds timeout)
    : ctx_(ctx), paths_(std::move(p)), timeout_(timeout) {}

backend::~backend() = default;

result<wire::reply> backend::call(const std::string& service, const google::protobuf::Message& msg,
                                  const std::string& token) {
  auto eps = layout::read_endpoints(paths_.endpoints());
  if (!eps) return make_error(errc::unavailable, "EdgeLoom is not running in " + paths_.root);
  const auto* ep = eps->find(service);
  if (!ep || ep->rpc.empty()) return make_error(errc::unavailable, service + " is not running");
  auto kind = layout::service_kind(service);
  if (kind.empty()) kind = service;
  // Pooled by where they connect (every replica of a replicated service):
  // a restarted service on new ports gets fresh clients.
  const auto targets = eps->rpc_targets(service);
  std::string where;
  for (const auto& t : targets) where += t + " ";
  std::unique_ptr<wire::client> cli;
  {
    std::lock_guard lk(mu_);
    auto& pool = idle_[where];
    if (!pool.empty()) {
      cli = std::move(pool.back());
      pool.pop_back();
    }
  }
  if (!cli) {
    auto server_key = wire::load_public_key(paths_.curve_dir(), kind);
    if (!server_key) return make_error(server_key.code(), service + ": " + server_key.err().message);
    auto mine = wire::load_keypair(paths_.curve_dir(), "client");
    if (!mine) return mine.err();
    // No retries: a browser's request is answered or reported within one timeout.
    cli = std::make_unique<wire::client>(ctx_, targets, *server_key, *mine,
                                         wire::client_options{timeout_, 0});
  }
  wire::request req;
  req.type = msg.GetDescriptor()->full_name();
  req.body = msg.SerializeAsString();
  req.token = token;
  auto rep = cli->call(std::move(req));
  if (!rep) return make_error(rep.code(), service + ": " + rep.err().message);
  std::lock_guard lk(mu_);
  auto& pool = idle_[where];
  if (pool.size() < max_idle_per_endpoint) pool.push_back(std::move(cli));
  return rep;
}

}  // namespace loom::console
