#include "libs/runtime/registrar.hpp"
#include "libs/wire/heartbeat.hpp"

#include "libs/retry/backoff.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
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

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
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
  auto sched_key = wire::load_public_key(env_.paths.curve_dir(), "scheduler");
  if (!sched || sched->rpc.empty() || !sched_key) {
    std::fprintf(stderr, "%s: no scheduler endpoint or key in %s; not registering\n", env_.name.c_str(),
                 env_.paths.root.c_str());
    return;
  }
  wire::client cli(*env_.ctx, sched->rpc, *sched_key, env_.keys,
                   wire::client_options{std::chrono::milliseconds(500), 0});
  retry::backoff again(std::chrono::milliseconds(100), std::chrono::milliseconds(2000));
  auto wait = [&](std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, d, [&] { return stop_.load(); });
  };
  while (!stop_) {
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
      auto rep = wire::call_typed<loom::v1::RegisterNodeReply>(cli, req, env_.service_token());
      if (rep) {
        registered_ = true;
        again.reset();
      } else {
        wait(again.next());
        continue;
      }
    }
    wait(heartbeat_interval);
    if (stop_) break;
    loom::v1::NodeHeartbeatRequest hb;
    hb.mutable_node()->set_value(env_.node_id);
    hb.set_unix_ns(now_ns());
    auto rep = wire::call_typed<loom::v1::NodeHeartbeatReply>(cli, hb, env_.service_token());
    if (!rep || !rep->known()) registered_ = false;
  }
}

}  // namespace loom::runtime
