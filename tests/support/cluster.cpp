#include "tests/support/cluster.hpp"

#include "libs/wire/curve.hpp"

#include <chrono>

namespace loom::test {

cluster::cluster(std::vector<std::string> up_args) {
  up_args.insert(up_args.begin(), "up");
  auto r = run_loom(home.path(), up_args, std::chrono::seconds(60));
  up = r.code == 0;
  refresh();
  if (auto k = auth::load_token_key(paths.token_key())) token_key = *k;
}

void cluster::refresh() {
  if (auto e = layout::read_endpoints(paths.endpoints())) eps = *e;
}

std::string cluster::token(auth::role role, std::vector<std::string> zones, long ttl_s, std::uint64_t epoch,
                           std::string principal) const {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count();
  auth::claims c{principal, role, std::move(zones), now + ttl_s, epoch, ttl_s > 0 ? now : now + ttl_s - 100};
  auto t = auth::issue_token(c, token_key);
  return t ? *t : "";
}

std::string cluster::admin() const {
  auto e = auth::read_epoch(paths.epoch());
  return token(auth::role::admin, {"*"}, 600, e ? *e : 0);
}

std::unique_ptr<wire::client> cluster::client(const std::string& service, int retries,
                                              std::chrono::milliseconds timeout) {
  auto server = wire::load_public_key(paths.curve_dir(), service);
  auto mine = wire::load_keypair(paths.curve_dir(), "client");
  if (!server || !mine || !eps.find(service)) return nullptr;
  return std::make_unique<wire::client>(ctx, eps.find(service)->rpc, *server, *mine,
                                        wire::client_options{timeout, retries});
}

}  // namespace loom::test
