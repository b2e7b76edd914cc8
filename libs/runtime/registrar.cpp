#include "libs/runtime/registrar.hpp"
#include "libs/runtime/scheduler_targets.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/wire/heartbeat.hpp"

#include "libs/retry/backoff.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "libs/wire/link_monitor.hpp"
#include "loom/v1/ingest.pb.h"
#include "loom/v1/scheduler.pb.h"

#include <unistd.h>

#include <cstdio>
#include <thread>

#ifndef LOOM_VERSION
#define LOOM_VERSION "dev"
#endif

namespace loom::runtime {
namespace {
using wire::heartbeat_interval;  // the scheduler counts missed beats in the same period
using steady = std::chrono::steady_clock;

// An edge site's datasets change with imports, rarely: asking its ingest
// every 10 heartbeats keeps `loom site list` within ~10 s of an import.
constexpr int datasets_every = 10;

wire::link_time since(steady::time_point t0) { return std::chrono::duration_cast<wire::link_time>(steady::now() - t0); }

// The site's datasets (names and sizes) from its own ingest; false when it did not answer.
bool site_datasets(service_env& env, loom::v1::NodeHeartbeatRequest& hb) {
  const auto* ingest = env.eps.find("ingest");
  auto key = wire::load_public_key(env.paths.curve_dir(), "ingest");
  if (!ingest || ingest->rpc.empty() || !key) return false;
  wire::client cli(*env.ctx, ingest->rpc, *key, env.keys, wire::client_options{std::chrono::milliseconds(1000), 0});
  auto rep = wire::call_typed<loom::v1::ListDatasetsReply>(cli, loom::v1::ListDatasetsRequest{}, env.service_token());
  if (!rep) return false;
  for (const auto& d : rep->datasets()) {
    auto* o = hb.add_datasets();
    o->set_name(d.name());
    o->set_bytes(d.bytes());
  }
  return true;
}
}  // namespace

registrar::registrar(service_env& env) : env_(env) { thread_ = std::thread([this] { run(); }); }

registrar::~registrar() { stop(); }

void registrar::stop() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void registrar::run() {
  const auto* sched = env_.eps.find("scheduler");
  const auto reach = layout::reach(env_.paths, env_.eps, "scheduler");
  auto sched_key = wire::load_public_key(reach.key_dir, "scheduler");
  if (!sched || sched->rpc.empty() || !sched_key) {
    std::fprintf(stderr, "%s: no scheduler endpoint or key in %s; not registering\n", env_.name.c_str(),
                 env_.paths.root.c_str());
    return;
  }
  // An edge site measures its link to the cloud from these calls (issue 15).
  const auto t0 = steady::now();
  wire::link_estimator link;
  scheduler_targets targets(env_.paths, env_.eps.rpc_targets("scheduler"));
  // Replicas: a heartbeat may have to find the new leader (the old one's
  // dropped connection, then a standby's redirect) within its interval.
  auto timeout = [&] { return std::chrono::milliseconds(targets.list().size() > 1 ? 1000 : 500); };
  auto connect = [&] {
    wire::client_options co{timeout(), 0};
    co.observe = [&link](const wire::link_observation& o) { link.observe(o); };
    return std::make_unique<wire::client>(*env_.ctx, targets.list(), *sched_key, env_.keys, co);
  };
  auto client = connect();
  retry::backoff again(std::chrono::milliseconds(100), std::chrono::milliseconds(2000));
  // The loop's own account of a silence (outage_log): each wait and call
  // against its plan, so a registration after a cut link can say it ran on time.
  wire::outage_log outage;
  auto wait = [&](std::chrono::milliseconds d) {
    const auto from = steady::now();
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, d, [&] { return stop_.load(); });
    outage.ran(std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - from), d);
  };
  // A call's plan: its timeout at each replica it may try, and a second more.
  auto call = [&](auto&& fn) {
    const auto from = steady::now();
    auto rep = fn();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - from);
    outage.ran(took, timeout() * static_cast<int>(std::max<std::size_t>(targets.list().size(), 1)) +
                         std::chrono::milliseconds(1000));
    if (rep) outage.answered(steady::now());
    return rep;
  };
  const bool site = env_.eps.is_site();
  const bool reports_datasets = site && env_.name == "trainer";
  int beats = 0;
  std::string last_refusal;
  bool lost = false;  // the last heartbeat found no cloud scheduler
  while (!stop_) {
    if (targets.refresh()) {  // a replica added or moved (peers.json)
      client = connect();
      std::fprintf(stderr, "%s: scheduler replicas now %s\n", env_.name.c_str(), describe_targets(targets.list()).c_str());
    }
    wire::client& cli = *client;
    if (!registered_) {
      loom::v1::RegisterNodeRequest req;
      req.mutable_node()->set_value(env_.node_id);
      req.set_service(env_.name);
      req.set_zone(env_.zone);
      auto* res = req.mutable_resources();
      res->set_cpu_cores(std::thread::hardware_concurrency());
      res->set_memory_bytes(static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                            static_cast<std::uint64_t>(::sysconf(_SC_PAGE_SIZE)));
      req.set_endpoint(env_.rpc_endpoint);
      req.set_pid(static_cast<std::uint32_t>(::getpid()));
      req.set_version(LOOM_VERSION);
      const auto said = outage.since_answer(steady::now());
      req.set_silent_ms(static_cast<std::uint64_t>(said.silent.count()));
      req.set_late_ms(static_cast<std::uint64_t>(said.late.count()));
      auto rep = call([&] { return wire::call_typed<loom::v1::RegisterNodeReply>(cli, req, token_for(env_, "scheduler")); });
      if (rep) {
        if (site) std::fprintf(stderr, "%s: registered with the cloud scheduler at %s\n", env_.name.c_str(), sched->rpc.c_str());
        registered_ = true;
        again.reset();
        beats = 0;
      } else {
        if (site && rep.err().message != last_refusal)  // once per reason: a revoked site, the cloud away
          std::fprintf(stderr, "%s: not registered with the cloud scheduler at %s: %s\n", env_.name.c_str(),
                       sched->rpc.c_str(), rep.err().to_string().c_str());
        last_refusal = rep.err().message;
        wait(again.next());
        continue;
      }
    }
    wait(heartbeat_interval);
    if (stop_) break;
    loom::v1::NodeHeartbeatRequest hb;
    hb.mutable_node()->set_value(env_.node_id);
    hb.set_unix_ns(static_cast<std::uint64_t>(unix_now_ns()));
    if (site) {
      const auto e = link.estimate(since(t0));
      if (e.srtt) {
        auto* l = hb.mutable_link();
        l->set_rtt_ms(std::chrono::duration<double, std::milli>(*e.srtt).count());
        l->set_bandwidth_bytes_per_s(e.bandwidth_bytes_per_s.value_or(0));
        l->set_state(std::string(wire::to_string(e.state)));
      }
      if (reports_datasets && beats++ % datasets_every == 0) hb.set_datasets_known(site_datasets(env_, hb));
    }
    auto rep = call([&] { return wire::call_typed<loom::v1::NodeHeartbeatReply>(cli, hb, token_for(env_, "scheduler")); });
    if (site && !rep != lost) {  // an edge site says when it loses the cloud and when it has it back
      lost = !rep;
      std::fprintf(stderr, lost ? "%s: lost the cloud scheduler at %s (%s); working on, trying again\n"
                                : "%s: the cloud scheduler at %s answers again%s\n",
                   env_.name.c_str(), sched->rpc.c_str(), lost ? rep.err().to_string().c_str() : "");
    }
    if (!rep || !rep->known()) registered_ = false;
  }
}

}  // namespace loom::runtime
