// A `loom up` in a throwaway data dir, and typed access to its services as
// the test's own client: CURVE with the deployment's client key, tokens
// minted with the deployment's token key. Torn down (by pid) on destruction.
#pragma once

#include "libs/auth/token.hpp"
#include "libs/layout/layout.hpp"
#include "libs/wire/client.hpp"
#include "tests/support/harness.hpp"

#include <zmq.hpp>

#include <memory>
#include <string>

namespace loom::test {

struct cluster {
  temp_dir home{"loom-cluster"};
  up_guard guard{home.path()};
  layout::paths paths{home.path()};
  layout::endpoints eps;
  std::string token_key;
  zmq::context_t ctx{1};
  bool up = false;

  // Runs `loom up` (with `up_args`, e.g. --import-root DIR); `up` says whether all five came up healthy.
  explicit cluster(std::vector<std::string> up_args = {});

  // A token for `role` in `zones` valid for `ttl_s` (negative: already expired).
  std::string token(auth::role role, std::vector<std::string> zones = {"*"}, long ttl_s = 600,
                    std::uint64_t epoch = 0, std::string principal = "tester") const;
  // An admin token of the current revocation epoch.
  std::string admin() const;

  // A client of `service` presenting the deployment's client key.
  std::unique_ptr<wire::client> client(const std::string& service, int retries = 1,
                                       std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  const layout::service_endpoint& ep(const std::string& service) const { return *eps.find(service); }
  // Re-reads endpoints.json (pids change after restarts).
  void refresh();
};

}  // namespace loom::test
