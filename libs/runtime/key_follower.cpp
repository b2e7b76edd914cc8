#include "libs/runtime/key_follower.hpp"
#include "libs/runtime/scheduler_targets.hpp"

#include "libs/runtime/admission.hpp"
#include "libs/runtime/site_keys.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/sites.pb.h"

#include <cstdio>

namespace loom::runtime {

bool key_follower::follows(const service_env& env) {
  if (env.eps.is_site()) return false;
  // Scheduler replicas on separate hosts: the one leading may be another
  // host's, so every process here follows it, the standby replica too (its
  // admission lets an enrolled site reach it and be told the leader).
  if (env.eps.scheduler_replica != 0) return true;
  return env.name != "scheduler" && !env.eps.runs_here("scheduler");
}

key_follower::key_follower(service_env& env) : env_(env) { thread_ = std::thread([this] { run(); }); }

key_follower::~key_follower() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void key_follower::run() {
  const auto* sched = env_.eps.find("scheduler");
  auto key = wire::load_public_key(env_.paths.curve_dir(), "scheduler");
  if (!sched || sched->rpc.empty() || !key) {
    std::fprintf(stderr, "%s: the scheduler runs on another host but %s names no endpoint or key for it; enrolled "
                         "sites are not admitted here (`loom up --peer-endpoints FILE`)\n",
                 env_.name.c_str(), env_.paths.endpoints().c_str());
    return;
  }
  scheduler_targets targets(env_.paths, env_.eps.rpc_targets("scheduler"));
  auto connect = [&] {
    return std::make_unique<wire::client>(*env_.ctx, targets.list(), *key, env_.keys, wire::client_options{period, 0});
  };
  auto client = connect();
  std::string last_error;
  auto note = [&](const std::string& e) {
    if (e == last_error) return;
    last_error = e;
    if (!e.empty())
      std::fprintf(stderr, "%s: site keys from the scheduler at %s: %s (the last ones stay in force)\n",
                   env_.name.c_str(), sched->rpc.c_str(), e.c_str());
  };
  while (!stop_) {
    const auto next = std::chrono::steady_clock::now() + period;
    if (targets.refresh()) client = connect();  // a replica added or moved (peers.json)
    auto rep = wire::call_typed<loom::v1::SiteKeysReply>(*client, loom::v1::SiteKeysRequest{}, token_for(env_, "scheduler"));
    if (!rep) {
      note(rep.err().to_string());
    } else {
      std::vector<site_key> keys;
      for (const auto& k : rep->keys()) keys.push_back({k.site(), k.service(), k.public_key()});
      bool changed = false;
      if (auto st = write_site_keys(env_.paths.sites_dir(), keys, &changed); !st) {
        note(st.err().to_string());
      } else {
        note("");
        if (changed && env_.admission) (void)env_.admission->refresh();
        synced_.fetch_add(1);
      }
    }
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, next, [&] { return stop_.load(); });
  }
}

}  // namespace loom::runtime
