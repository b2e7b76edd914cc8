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

// The services of `file` (a copy of the other host's endpoints.json) that it runs.
result<layout::endpoints> peer_file(const std::string& file, const std::vector<std::string>& only) {
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
    const auto kind = layout::service_kind(name);
    if (!p->runs_here(kind) || s.rpc.empty()) continue;
    if (has(only, kind)) return bad("--peer-endpoints " + file + ": both hosts run " + kind + " (--only " + joined(only) + ")");
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
  const bool site = c.a.get("site").has_value() || previous.is_site();
  if (auto o = c.a.get("only")) {
    if (site) return bad("--only splits a cloud over hosts; an edge site (--site) runs audit, ingest and trainers");
    auto l = only_list(*o);
    if (!l) return l.err();
    plan.only = *l;
  }
  const auto file = c.a.get("peer-endpoints");
  if (file && plan.only.empty())
    return bad("--peer-endpoints " + *file + " goes with --only: this host runs every service");
  if (file) {
    auto p = peer_file(*file, plan.only);
    if (!p) return p.err();
    plan.peers = *p;
  }
  if (plan.only.empty()) return plan;
  // What the peers run: the file given, else the one kept from an earlier `up`.
  std::vector<std::string> elsewhere;
  std::optional<layout::endpoints> kept;
  if (!plan.peers)
    if (auto k = layout::read_endpoints(c.paths.peers(), false)) kept = *k;
  if (const auto& p = plan.peers ? plan.peers : kept)
    for (const auto& [name, s] : p->services) elsewhere.push_back(layout::service_kind(name));
  for (const char* needed : {"scheduler", "audit"})  // every service registers with one and records to the other
    if (!has(plan.only, needed) && !has(elsewhere, needed))
      return bad("--only " + joined(plan.only) + ": the " + needed + " runs on another host; name its endpoints with "
                 "--peer-endpoints FILE (a copy of that host's endpoints.json)");
  return plan;
}

status keep_peers(const layout::paths& p, const split_plan& plan) {
  if (!plan.peers) return ok_status();
  return layout::write_endpoints(p.peers(), *plan.peers);
}

}  // namespace loom::cli
