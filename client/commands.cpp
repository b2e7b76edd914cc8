// `loom status` and `loom ping`: what is running, and does it answer. Both go
// over every process of the deployment (layout::process_names: extra trainers
// are rows trainer-2 ... trainer-N). Status's RESTARTS are the watcher's
// restarts of the process (endpoints.json); a service's in-process actor
// restarts are its Health reply's, "actor_restarts" in --json. At an edge
// site, status adds the cloud's scheduler and aggregator ("cloud": true), and
// the roster is the cloud's: reached with the cloud's keys and the site's
// token (layout::reach), like every command's calls to them. On a cloud split
// over hosts it adds the other host's services ("other_host": true).
#include "client/cli.hpp"
#include "client/typed_call.hpp"

#include "loom/v1/replica.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/service.pb.h"
#include "loom/v1/trainer.pb.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

namespace loom::cli {
namespace {

// Every process of the deployment; the six services when none is recorded.
std::vector<std::string> processes(const context& c) {
  auto eps = layout::read_endpoints(c.paths.endpoints());
  return layout::process_names(eps ? *eps : layout::endpoints{});
}

std::vector<std::string> targets(const context& c, std::size_t from) {
  std::vector<std::string> out(c.a.positional.begin() + static_cast<long>(std::min(from, c.a.positional.size())),
                               c.a.positional.end());
  if (out.empty()) out = processes(c);
  return out;
}

}  // namespace

health_info probe(context& c, const std::string& service) {
  health_info h;
  h.name = service;
  const bool was = c.pinned;
  c.pinned = true;  // this process, not whichever replica leads
  auto rep = typed_call<loom::v1::HealthReply>(c, service, loom::v1::HealthRequest{}, 0);
  c.pinned = was;
  if (!rep) {
    h.error = rep.err().message;
    return h;
  }
  h.reachable = true;
  h.healthy = rep->healthy();
  h.pid = rep->pid();
  h.uptime_ms = rep->uptime_ms();
  h.restarts = rep->restarts();
  h.endpoint = rep->endpoint();
  h.metrics = rep->metrics_endpoint();
  h.version = rep->version();
  h.node_id = rep->node_id();
  h.audit_spooled = rep->audit_spooled();
  return h;
}

int cmd_status(context& c) {
  auto eps = layout::read_endpoints(c.paths.endpoints());
  if (!eps)
    return fail(c, make_error(errc::unavailable, "EdgeLoom is not running in " + c.paths.root + " (run `loom up`)"));
  if (c.a.get("timeout") == std::nullopt) c.timeout = std::chrono::milliseconds(1000);
  // This deployment's processes, then (at an edge site) the cloud's services it
  // reaches (layout::reach: the cloud's keys and the site's token).
  // A cloud split over hosts (`loom up --only`) adds the other host's services
  // it knows (--peer-endpoints) the same way.
  auto names = layout::process_names(*eps);
  std::vector<bool> cloud(names.size(), false);
  for (auto s : layout::service_names)
    if (!eps->runs_here(s) && eps->find(s) && !eps->find(s)->rpc.empty()) {
      names.emplace_back(s);
      cloud.push_back(true);
    }
  std::vector<health_info> hs;
  int healthy = 0;
  for (const auto& n : names) {
    hs.push_back(probe(c, n));
    healthy += hs.back().healthy;
  }
  // Restarts and last exit as the watcher keeps them, read after the probes: a
  // process that answered from its new pid has its restart counted already
  // (the watcher records the exit before it starts the next one).
  std::vector<layout::service_endpoint> recorded;
  auto now = layout::read_endpoints(c.paths.endpoints());
  for (const auto& n : names) {
    const auto* r = now ? now->find(n) : eps->find(n);
    recorded.push_back(r ? *r : layout::service_endpoint{});
  }
  auto nodes = typed_call<loom::v1::ListNodesReply>(c, "scheduler", loom::v1::ListNodesRequest{}, 0);
  // Scheduler and audit replicas (issue 30): who leads, the epoch, each one's lag.
  struct replica_answer {
    std::string kind, name;
    result<loom::v1::ReplicaStatusReply> reply;
  };
  std::vector<replica_answer> replicas;
  for (const char* kind : {"scheduler", "audit"})
    if (eps->count_of(kind) > 1 && eps->runs_here(kind)) {
      c.pinned = true;
      for (int k = 1; k <= eps->count_of(kind); ++k) {
        const auto n = layout::instance_name(kind, k);
        replicas.push_back({kind, n, typed_call<loom::v1::ReplicaStatusReply>(c, n, loom::v1::ReplicaStatusRequest{}, 0)});
      }
      c.pinned = false;
    }
  // Each trainer here: how its stages run (issue 30: processes under cgroup
  // v2/v1 limits, setrlimit, or its thread) and its load-shedding gauge.
  std::vector<std::pair<std::string, result<loom::v1::TrainerStatusReply>>> trainers;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (!cloud[i] && layout::service_kind(names[i]) == "trainer" && hs[i].healthy)
      trainers.emplace_back(names[i], typed_call<loom::v1::TrainerStatusReply>(c, names[i], loom::v1::TrainerStatusRequest{}, 0));
  if (c.json) {
    nlohmann::json svc = nlohmann::json::array(), nds = nlohmann::json::array();
    for (std::size_t i = 0; i < hs.size(); ++i) {
      const auto& h = hs[i];
      svc.push_back({{"name", h.name}, {"cloud", eps->is_site() && cloud[i]}, {"other_host", bool(cloud[i])}, {"healthy", h.healthy}, {"pid", h.pid}, {"uptime_ms", h.uptime_ms},
                     {"restarts", recorded[i].restarts}, {"actor_restarts", h.restarts},
                     {"last_exit", recorded[i].last_exit}, {"last_error", recorded[i].last_error},
                     {"endpoint", h.endpoint}, {"metrics", h.metrics}, {"version", h.version},
                     {"node_id", h.node_id}, {"audit_spooled", h.audit_spooled}, {"error", h.error}});
    }
    if (nodes)
      for (auto& n : nodes->nodes())
        nds.push_back({{"id", n.node().value()}, {"service", n.service()}, {"zone", n.zone()},
                       {"state", n.state()}, {"pid", n.pid()}, {"endpoint", n.endpoint()},
                       {"cpu_cores", n.resources().cpu_cores()}, {"gpus", n.resources().gpus()},
                       {"memory_bytes", n.resources().memory_bytes()}, {"version", n.version()},
                       {"last_seen_unix_ns", n.last_seen_unix_ns()}});
    nlohmann::json reps = nlohmann::json::array(), audit_reps = nlohmann::json::array();
    for (const auto& [kind, n, r] : replicas)
      (kind == "audit" ? audit_reps : reps)
          .push_back(r ? nlohmann::json{{"name", n}, {"node_id", r->node_id()}, {"zone", r->zone()}, {"role", r->role()},
                                        {"epoch", r->epoch()}, {"leader", r->leader()},
                                        {"leader_endpoint", r->leader_endpoint()}, {"lease_left_ms", r->lease_left_ms()},
                                        {"view_age_ms", r->view_age_ms()}, {"takeovers", r->takeovers()},
                                        {"last_error", r->last_error()}}
                       : nlohmann::json{{"name", n}, {"error", r.err().message}});
    nlohmann::json trs = nlohmann::json::array();
    for (const auto& [n, r] : trainers)
      if (r)
        trs.push_back({{"name", n}, {"state", r->state()}, {"isolation", r->isolation()}, {"pressure", r->pressure()},
                       {"memory_used", r->memory_used()}});
      else
        trs.push_back({{"name", n}, {"error", r.err().message}});
    print_json({{"data_dir", c.paths.root}, {"scheduler_replicas", reps}, {"audit_replicas", audit_reps}, {"trainers", trs},
                {"network", {{"listen", eps->net.listen}, {"advertise", eps->net.advertise}, {"ports", eps->net.ports()}}},
                {"services", svc}, {"nodes", nds},
                {"roster_error", nodes ? std::string() : nodes.err().message}});
  } else {
    std::printf("listening on %s, advertised as %s, ports %s\n\n", printable(eps->net.listen).c_str(),
                printable(eps->net.advertise).c_str(), eps->net.has_range() ? eps->net.ports().c_str() : "any free");
    std::printf("%-11s %-8s %-7s %-9s %-9s %s\n", "SERVICE", "HEALTH", "PID", "UPTIME_S", "RESTARTS", "ENDPOINT");
    for (std::size_t i = 0; i < hs.size(); ++i) {
      const auto& h = hs[i];
      std::string note = h.error;
      if (cloud[i]) note = (eps->is_site() ? "the cloud's" : "another host's") + (note.empty() ? "" : ": " + note);
      if (!h.healthy && !recorded[i].last_exit.empty())
        note += (note.empty() ? "last " : "; last ") + recorded[i].last_exit;
      std::printf("%-11s %-8s %-7lld %-9.1f %-9llu %s%s\n", printable(h.name).c_str(), h.healthy ? "healthy" : "DOWN",
                  static_cast<long long>(h.pid), h.uptime_ms / 1000.0,
                  static_cast<unsigned long long>(recorded[i].restarts), printable(h.endpoint).c_str(),
                  note.empty() ? "" : ("  (" + printable(note) + ")").c_str());
    }
    if (!replicas.empty()) {
      std::printf("\n%-13s %-8s %-6s %-28s %-9s %s\n", "REPLICA", "ROLE", "EPOCH", "LEADER", "LEASE_MS",
                  "LAG_MS");
      for (const auto& [kind, n, r] : replicas)
        if (r)
          std::printf("%-13s %-8s %-6llu %-28s %-9llu %llu%s\n", printable(n).c_str(), printable(r->role()).c_str(),
                      static_cast<unsigned long long>(r->epoch()), printable(r->leader()).c_str(),
                      static_cast<unsigned long long>(r->lease_left_ms()),
                      static_cast<unsigned long long>(r->view_age_ms()),
                      r->last_error().empty() ? "" : ("  (" + printable(r->last_error()) + ")").c_str());
        else
          std::printf("%-13s %-8s (%s)\n", printable(n).c_str(), "DOWN", printable(r.err().message).c_str());
    }
    if (!trainers.empty()) {
      std::printf("\n%-11s %-9s %-7s %s\n", "TRAINER", "PRESSURE", "MEMORY", "STAGES RUN IN");
      for (const auto& [n, r] : trainers)
        if (r)
          std::printf("%-11s %-9s %-7s %s\n", printable(n).c_str(), printable(r->pressure()).c_str(),
                      r->memory_used() >= 0 ? (std::to_string(static_cast<int>(r->memory_used() * 100 + 0.5)) + "%").c_str() : "?",
                      printable(r->isolation()).c_str());
        else
          std::printf("%-11s (%s)\n", printable(n).c_str(), printable(r.err().message).c_str());
    }
    std::printf("\n%-28s %-11s %-7s %-8s %-6s %s\n", "NODE", "SERVICE", "ZONE", "STATE", "CORES", "MEMORY_GIB");
    if (nodes)
      for (auto& n : nodes->nodes())
        std::printf("%-28s %-11s %-7s %-8s %-6u %.1f\n", printable(n.node().value()).c_str(),
                    printable(n.service()).c_str(), printable(n.zone()).c_str(), printable(n.state()).c_str(),
                    n.resources().cpu_cores(),
                    n.resources().memory_bytes() / 1073741824.0);
    else
      std::printf("(roster unavailable: %s)\n", printable(nodes.err().message).c_str());
  }
  return healthy == static_cast<int>(hs.size()) ? ok_exit : unavailable_exit;
}

int cmd_ping(context& c) {
  auto names = targets(c, 1);
  for (auto& n : names)
    if (layout::service_kind(n).empty())
      return usage("loom ping: unknown service '" + printable(n) +
                   "' (ingest, scheduler, trainer, trainer-K, aggregator, audit)");
  int worst = ok_exit;
  nlohmann::json results = nlohmann::json::array();
  for (auto& n : names) {
    loom::v1::PingRequest req;
    req.set_payload("loom");
    auto t0 = std::chrono::steady_clock::now();
    auto rep = typed_call<loom::v1::PingReply>(c, n, req, 1);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rep && rep->payload() == "loom") {
      results.push_back({{"service", n}, {"ok", true}, {"rtt_ms", ms}});
      if (!c.json) std::printf("%-11s ok  %.2f ms\n", printable(n).c_str(), ms);
    } else {
      auto e = rep ? make_error(errc::internal, "ping payload not echoed") : rep.err();
      results.push_back({{"service", n}, {"ok", false}, {"error", e.message}, {"code", to_string(e.code)}});
      if (!c.json) std::printf("%-11s FAIL %s\n", printable(n).c_str(), printable(e.to_string()).c_str());
      int code = loom::exit_code(e.code);
      if (worst == ok_exit || code == denied_exit) worst = code;
    }
  }
  if (c.json) print_json({{"results", results}});
  return worst;
}

}  // namespace loom::cli
