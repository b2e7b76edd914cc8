#include "client/up_split.hpp"

#include <algorithm>
#include <sstream>

namespace loom::cli {
namespace {

error bad(const std::string& why) { return error{errc::invalid_argument, why}; }

bool has(const std::vector<std::string>& v, std::string_view s) { return std::find(v.begin(), v.end(), s) != v.end(); }

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

result<std::vector<std::string>> only_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (!layout::is_service(part))
      return bad("--only " + text + ": \"" + part + "\" is no service (audit, scheduler, ingest, trainer, aggregator)");
    if (has(out, part)) return bad("--only " + text + ": names " + part + " twice");
    out.push_back(part);
  }
  if (out.empty()) return bad("--only needs at least one service");
  return out;
}

// The processes of `file` (a copy of another host's endpoints.json) that it
// runs, none of them one `mine` runs.
result<layout::endpoints> peer_file(const std::string& file, const layout::endpoints& mine) {
  auto p = layout::read_endpoints(file, false);
  if (!p) return bad("--peer-endpoints " + file + ": " + p.err().message);
  if (p->is_site()) return bad("--peer-endpoints " + file + " is an edge site's, not a cloud host's");
  if (p->only.empty())
    return bad("--peer-endpoints " + file + " is a whole cloud's (no \"only\"): give the endpoints.json of a host "
               "started with `loom up --only`");
  layout::endpoints out;
  out.only = p->only;
  out.net = p->net;
  for (const auto& [name, s] : p->services) {
    if (!p->runs_process(name) || s.rpc.empty()) continue;
    if (mine.runs_process(name))
      return bad("--peer-endpoints " + file + ": both hosts run " + name + " (--only " + joined(mine.only) +
                 (mine.scheduler_replica ? " --scheduler-replica " + std::to_string(mine.scheduler_replica) : "") + ")");
    out.services[name] = s;
    out.services[name].pid = 0;
  }
  return out;
}

}  // namespace

bool only_given(const context& c) { return c.a.get("only").has_value(); }

result<split_plan> split_option(const context& c, const layout::endpoints& previous) {
  split_plan plan;
  plan.only = previous.only;
  plan.replica = previous.scheduler_replica;
  const bool site = c.a.get("site").has_value() || previous.is_site();
  if (auto o = c.a.get("only")) {
    if (site) return bad("--only splits a cloud over hosts; an edge site (--site) runs audit, ingest and trainers");
    auto l = only_list(*o);
    if (!l) return l.err();
    plan.only = *l;
  }
  // This host as it will run: which scheduler replica, of how many.
  layout::endpoints mine;
  mine.only = plan.only;
  mine.scheduler_replicas = static_cast<int>(c.a.number("scheduler-replicas").value_or(previous.scheduler_replicas));
  if (auto k = c.a.number("scheduler-replica")) {
    if (!has(plan.only, "scheduler"))
      return bad("--scheduler-replica " + std::to_string(*k) + " goes with --only naming the scheduler: the other "
                 "replicas run on other hosts");
    plan.replica = static_cast<int>(*k);
  }
  if (!has(plan.only, "scheduler")) plan.replica = 0;
  if (plan.replica > mine.scheduler_replicas)
    return bad("--scheduler-replica " + std::to_string(plan.replica) + " is beyond --scheduler-replicas " +
               std::to_string(mine.scheduler_replicas));
  mine.scheduler_replica = plan.replica;
  const auto files = c.a.all("peer-endpoints");
  if (!files.empty() && plan.only.empty())
    return bad("--peer-endpoints " + files.front() + " goes with --only: this host runs every service");
  for (const auto& file : files) {
    auto p = peer_file(file, mine);
    if (!p) return p.err();
    if (!plan.peers) plan.peers = layout::endpoints{};
    for (const auto& [name, s] : p->services) plan.peers->services[name] = s;
  }
  if (plan.only.empty()) return plan;
  // What the peers run: the files given and those kept from an earlier `up`.
  std::vector<std::string> elsewhere;
  if (auto kept = layout::read_endpoints(c.paths.peers(), false))
    for (const auto& [name, s] : kept->services)
      if (!mine.runs_process(name)) elsewhere.push_back(layout::service_kind(name));
  if (plan.peers)
    for (const auto& [name, s] : plan.peers->services) elsewhere.push_back(layout::service_kind(name));
  for (const char* needed : {"scheduler", "audit"})  // every service registers with one and records to the other
    if (!has(plan.only, needed) && !has(elsewhere, needed))
      return bad("--only " + joined(plan.only) + ": the " + needed + " runs on another host; name its endpoints with "
                 "--peer-endpoints FILE (a copy of that host's endpoints.json)");
  return plan;
}

status keep_peers(const layout::paths& p, const split_plan& plan) {
  if (!plan.peers) return ok_status();
  layout::endpoints merged = *plan.peers;
  if (auto kept = layout::read_endpoints(p.peers(), false))
    for (const auto& [name, s] : kept->services) merged.services.try_emplace(name, s);
  // The file's own "only" lists what its processes are (read_endpoints keeps
  // a peer's entry only where this host does not run that process).
  merged.only.clear();
  for (const auto& [name, s] : merged.services)
    if (const auto kind = layout::service_kind(name); !has(merged.only, kind)) merged.only.push_back(kind);
  return layout::write_endpoints(p.peers(), merged);
}

}  // namespace loom::cli
