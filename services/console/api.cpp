#include "services/console/api.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/files/files.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/sites.pb.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace loom::console {

using nlohmann::json;

int http_status(errc code) {
  switch (code) {
    case errc::ok: return 200;
    case errc::invalid_argument: return 400;
    case errc::unauthenticated: return 401;
    case errc::permission_denied: return 403;
    case errc::not_found: return 404;
    case errc::already_exists: return 409;
    case errc::resource_exhausted: return 429;
    case errc::unavailable: return 503;
    case errc::deadline_exceeded: return 504;
    default: return 500;
  }
}

api_reply error_reply(const error& e) {
  api_reply r;
  r.status = http_status(e.code);
  r.body = {{"error", {{"code", std::string(to_string(e.code))}, {"message", e.message}}}};
  return r;
}

json to_json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(m, &out, o).ok()) return json::object();
  return json::parse(out, nullptr, false);
}

api_reply ok_reply(json body) {
  api_reply r;
  r.body = std::move(body);
  return r;
}

api_reply not_route(const api_call& c) {
  return error_reply(make_error(errc::not_found, "no route " + c.method + " " + c.path));
}

namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < path.size()) {
    auto end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    if (end > at) out.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

error bad(const std::string& what) { return make_error(errc::invalid_argument, what); }

// A string field of the JSON body: "" when absent; invalid_argument when not a string or too long.
result<std::string> field(const json& body, const char* name, std::size_t max = 4096) {
  if (!body.is_object() || !body.contains(name)) return std::string();
  const auto& v = body[name];
  if (!v.is_string()) return bad(std::string("\"") + name + "\" must be a string");
  auto s = v.get<std::string>();
  if (s.size() > max) return bad(std::string("\"") + name + "\" is longer than " + std::to_string(max) + " bytes");
  return s;
}

std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(loom::wall_now().time_since_epoch())
          .count());
}

// Template names: lower-case words and digits, '-', '_', one '/' level (industry/legal).
bool valid_template_name(const std::string& n) {
  if (n.empty() || n.size() > 128 || n.front() == '/' || n.find("..") != std::string::npos) return false;
  return std::all_of(n.begin(), n.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '/';
  });
}

}  // namespace

api::api(backend& b, job_series& series, std::vector<std::string> template_dirs)
    : b_(b), series_(series), template_dirs_(std::move(template_dirs)) {
  auto eps = layout::read_endpoints(b_.paths().endpoints());
  cloud_zone_ = eps ? eps->zone : "local";
}

api_reply api::handle(const api_call& c) {
  auto parts = split_path(c.path);  // "api", ...
  if (parts.size() < 2 || parts[0] != "api") return error_reply(make_error(errc::not_found, "no route " + c.path));
  const std::string& area = parts[1];
  if (area == "session" && c.method == "GET")
    return ok_reply({{"logged_in", true}, {"principal", c.who.principal}, {"role", c.who.role}, {"tenant", c.who.tenant},
                     {"csrf", c.who.csrf}});
  if ((area == "overview" || area == "topology") && c.method == "GET") {
    auto p = cluster(c.who, area == "topology");
    if (!p) return error_reply(p.err());
    return ok_reply(area == "overview" ? std::move(p->overview) : std::move(p->topology));
  }
  if (area == "templates" && c.method == "GET") return ok_reply(templates());
  if (area == "jobs") return jobs_route(c, parts);
  if (area == "nodes" || area == "sites") return cluster_route(c, parts);
  if (area == "models" || area == "exports") return models_route(c, parts);
  if (area == "datasets" || area == "tasks" || area == "audit") return data_route(c, parts);
  return not_route(c);
}

// ---- jobs -------------------------------------------------------------

result<json> api::job(const session& who, const std::string& id, std::size_t from, std::size_t* next) {
  loom::v1::GetJobRequest req;
  req.set_id(id);
  auto rep = b_.typed<loom::v1::GetJobReply>("scheduler", req, who.token);
  if (!rep) return rep.err();
  const auto t = now_ms();
  for (const auto& s : rep->job().stages())
    if (s.step() > 0 && (s.state() == "running" || s.state() == "succeeded"))
      series_.add(id, {s.name(), s.step(), s.loss(), s.tokens_per_s(), t});
  json out = to_json(*rep);
  json pts = json::array();
  for (const auto& p : series_.since(id, from, next))
    pts.push_back({{"stage", p.stage}, {"step", p.step}, {"loss", p.loss}, {"tokens_per_s", p.tokens_per_s},
                   {"unix_ms", p.unix_ms}});
  out["series"] = std::move(pts);
  return out;
}

api_reply api::jobs_route(const api_call& c, const std::vector<std::string>& parts) {
  if (parts.size() == 2 && c.method == "GET") {
    loom::v1::ListJobsRequest req;
    if (auto it = c.query.find("state"); it != c.query.end()) req.set_state(it->second);
    return reply_of(b_.typed<loom::v1::ListJobsReply>("scheduler", req, c.who.token));
  }
  if (parts.size() == 2 && c.method == "POST") return submit(c);
  if (parts.size() == 3 && c.method == "GET") {
    auto j = job(c.who, parts[2], 0, nullptr);
    return j ? ok_reply(*j) : error_reply(j.err());
  }
  if (parts.size() == 4 && parts[3] == "cancel" && c.method == "POST") {
    loom::v1::CancelJobRequest req;
    req.set_id(parts[2]);
    auto reason = field(c.body, "reason", 512);
    if (!reason) return error_reply(reason.err());
    req.set_reason(reason->empty() ? "cancelled from the console by " + c.who.principal : *reason);
    return reply_of(b_.typed<loom::v1::CancelJobReply>("scheduler", req, c.who.token));
  }
  return not_route(c);
}

api_reply api::submit(const api_call& c) {
  auto name = field(c.body, "template", 128);
  if (!name) return error_reply(name.err());
  if (!valid_template_name(*name))
    return error_reply(bad("\"template\" must name a template (letters, digits, '-', '_', one '/'), got \"" +
                           name->substr(0, 64) + "\""));
  loom::v1::SubmitJobRequest req;
  std::string text;
  for (const auto& d : template_dirs_) {
    for (const auto& p : {d + "/" + *name + ".toml", d + "/" + *name + "/template.toml"}) {
      if (auto t = files::read_file(p)) {
        text = *t;
        break;
      }
    }
    if (!text.empty()) break;
  }
  if (text.empty()) return error_reply(make_error(errc::not_found, "no template " + *name));
  req.set_template_name(*name);
  req.set_template_toml(text);
  if (c.body.contains("overrides")) {
    const auto& o = c.body["overrides"];
    if (!o.is_array() || o.size() > 64) return error_reply(bad("\"overrides\" must be a list of at most 64 key=value"));
    for (const auto& kv : o) {
      if (!kv.is_string() || kv.get<std::string>().size() > 4096 ||
          kv.get<std::string>().find('=') == std::string::npos)
        return error_reply(bad("each override must be a string key=value of at most 4096 bytes"));
      req.add_overrides(kv.get<std::string>());
    }
  }
  auto prio = field(c.body, "priority", 64);
  if (!prio) return error_reply(prio.err());
  req.set_priority_class(*prio);
  return reply_of(b_.typed<loom::v1::SubmitJobReply>("scheduler", req, c.who.token));
}

json api::templates() const {
  std::map<std::string, std::string> seen;  // name -> first line of its description
  for (const auto& d : template_dirs_) {
    std::error_code ec;
    for (std::filesystem::recursive_directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      if (it.depth() > 1) continue;
      const auto p = it->path();
      std::string name;
      if (p.extension() == ".toml" && p.filename() != "template.toml" && it.depth() == 0) name = p.stem().string();
      else if (p.filename() == "template.toml" && it.depth() == 1)
        name = std::filesystem::relative(p.parent_path(), d, ec).string();
      if (name.empty() || !valid_template_name(name) || seen.count(name)) continue;
      std::string about;
      if (auto t = files::read_file(p.string()); t && t->rfind("#", 0) == 0)
        about = t->substr(1, t->find('\n') - 1);
      seen[name] = about;
    }
  }
  json out = json::array();
  for (const auto& [n, a] : seen) out.push_back({{"name", n}, {"about", a}});
  return {{"templates", out}};
}

// ---- nodes, sites, topology, overview --------------------------------

api_reply api::cluster_route(const api_call& c, const std::vector<std::string>& parts) {
  if (parts[1] == "nodes") {
    if (parts.size() == 2 && c.method == "GET")
      return reply_of(b_.typed<loom::v1::ListNodesReply>("scheduler", loom::v1::ListNodesRequest{}, c.who.token));
    if (parts.size() == 4 && c.method == "POST" && (parts[3] == "drain" || parts[3] == "undrain")) {
      auto reason = field(c.body, "reason", 512);
      if (!reason) return error_reply(reason.err());
      const std::string why = reason->empty() ? parts[3] + " from the console by " + c.who.principal : *reason;
      if (parts[3] == "drain") {
        loom::v1::DrainNodeRequest req;
        req.mutable_node()->set_value(parts[2]);
        req.set_reason(why);
        return reply_of(b_.typed<loom::v1::DrainNodeReply>("scheduler", req, c.who.token));
      }
      loom::v1::UndrainNodeRequest req;
      req.mutable_node()->set_value(parts[2]);
      req.set_reason(why);
      return reply_of(b_.typed<loom::v1::UndrainNodeReply>("scheduler", req, c.who.token));
    }
  } else {
    if (parts.size() == 2 && c.method == "GET")
      return reply_of(b_.typed<loom::v1::ListSitesReply>("scheduler", loom::v1::ListSitesRequest{}, c.who.token));
    if (parts.size() == 3 && parts[2] == "token" && c.method == "POST") {
      auto site = field(c.body, "site", 63);
      if (!site) return error_reply(site.err());
      loom::v1::IssueSiteTokenRequest req;
      req.set_site(*site);
      if (c.body.contains("ttl_s") && c.body["ttl_s"].is_number_unsigned())
        req.set_ttl_ms(c.body["ttl_s"].get<std::uint64_t>() * 1000);
      return reply_of(b_.typed<loom::v1::IssueSiteTokenReply>("scheduler", req, c.who.token));
    }
    if (parts.size() == 4 && parts[3] == "revoke" && c.method == "POST") {
      loom::v1::RevokeSiteRequest req;
      req.set_site(parts[2]);
      auto reason = field(c.body, "reason", 512);
      if (!reason) return error_reply(reason.err());
      req.set_reason(reason->empty() ? "revoked from the console by " + c.who.principal : *reason);
      return reply_of(b_.typed<loom::v1::RevokeSiteReply>("scheduler", req, c.who.token));
    }
  }
  return not_route(c);
}

namespace {
// Worst of two link states: down > degraded > up > "".
int rank(const std::string& s) { return s == "down" ? 3 : s == "degraded" ? 2 : s == "up" ? 1 : 0; }
std::string worst(const std::string& a, const std::string& b) { return rank(a) >= rank(b) ? a : b; }


// The topology page: the cloud (its zone's trainers, whether an aggregator
// runs), each site with its trainers and its link, from one round of replies.
json topology_of(const loom::v1::ListSitesReply& sites, const loom::v1::ListNodesReply& nodes,
                 const loom::v1::ListJobsReply& jobs, const std::string& cloud_zone) {
  // A site's latest outer round and its trainer's progress, from the running
  // diloco stages this caller may see.
  std::map<std::string, json> rounds;
  for (const auto& j : jobs.jobs())
    if (j.state() == "running")
      for (const auto& s : j.stages())
        for (const auto& x : s.sites())
          rounds[x.site()] = {{"job", j.id()}, {"stage", s.name()}, {"round", x.round()}, {"step", x.step()},
                              {"loss", x.loss()}, {"stall_s", x.stall_s()}};
  json cloud_trainers = json::array();
  bool aggregator = false;
  for (const auto& n : nodes.nodes()) {
    if (n.service() == "aggregator") aggregator = true;
    if (n.zone() == cloud_zone && n.service() == "trainer")
      cloud_trainers.push_back({{"node", n.node().value()}, {"state", n.state()},
                                {"last_seen_unix_ns", n.last_seen_unix_ns()}});
  }
  json out_sites = json::array();
  for (const auto& s : sites.sites()) {
    // The link as the site's trainers last measured it, made worse by what
    // the roster knows: no trainer alive is a link that is down.
    std::string trainers_state;
    int alive = 0;
    json trainers = json::array();
    for (const auto& t : s.trainers()) {
      trainers.push_back({{"node", t.node()}, {"state", t.state()}, {"last_seen_unix_ns", t.last_seen_unix_ns()}});
      if (t.state() != "dead") ++alive;  // alive, draining, or suspect (one missed beat: degraded)
      if (t.state() == "suspect") trainers_state = worst(trainers_state, "degraded");
    }
    std::string state = s.has_link() ? s.link().state() : std::string("up");
    if (s.state() != "enrolled") state = s.state() == "revoked" ? "down" : "";
    else if (s.trainers_size() == 0 || alive == 0) state = "down";
    else state = worst(state, trainers_state);
    json site = {{"name", s.name()},
                 {"state", s.state()},
                 {"link_state", state},
                 {"rtt_ms", s.has_link() ? s.link().rtt_ms() : 0.0},
                 {"bandwidth_bytes_per_s", s.has_link() ? s.link().bandwidth_bytes_per_s() : 0.0},
                 {"last_contact_unix_ns", s.last_contact_unix_ns()},
                 {"trainers", trainers}};
    if (auto it = rounds.find(s.name()); it != rounds.end()) site["last_round"] = it->second;
    out_sites.push_back(std::move(site));
  }
  return json{{"cloud", {{"zone", cloud_zone}, {"aggregator", aggregator}, {"trainers", cloud_trainers}}},
              {"sites", out_sites},
              {"roster_version", nodes.roster_version()}};
}

// The overview page: trainers busy, queue, running jobs, alerts.
json overview_of(const loom::v1::ListNodesReply& nodes, const loom::v1::ListJobsReply& jobs) {
  std::map<std::string, int> node_states, job_states;
  json alerts = json::array(), running = json::array();
  int busy = 0, trainers = 0;
  std::map<std::string, bool> used;
  for (const auto& j : jobs.jobs()) {
    ++job_states[j.state()];
    if (j.state() == "running") {
      json stages = json::array();
      for (const auto& s : j.stages()) {
        if (s.state() != "running") continue;
        stages.push_back({{"name", s.name()}, {"step", s.step()}, {"total_steps", s.total_steps()},
                          {"loss", s.loss()}, {"tokens_per_s", s.tokens_per_s()}});
        for (const auto& m : s.members()) used[m] = true;
        if (!s.node().empty()) used[s.node()] = true;
      }
      running.push_back({{"id", j.id()}, {"name", j.name()}, {"stages", stages}});
    }
    if (j.state() == "failed")
      alerts.push_back({{"severity", "warning"}, {"what", "job " + j.id() + " failed"}, {"detail", j.message()}});
  }
  for (const auto& n : nodes.nodes()) {
    ++node_states[n.state()];
    if (n.service() != "trainer") continue;
    ++trainers;
    if (used.count(n.node().value())) ++busy;
    if (n.state() == "dead")
      alerts.push_back({{"severity", "critical"}, {"what", "trainer " + n.node().value() + " is dead"},
                        {"detail", "zone " + n.zone()}});
  }
  const int queued = job_states["queued"] + job_states["pending"];
  return json{{"nodes", node_states},
              {"jobs", job_states},
              {"queue", queued},
              {"trainers", trainers},
              {"busy_trainers", busy},
              {"utilisation", trainers ? double(busy) / trainers : 0.0},
              {"running", running},
              {"alerts", alerts}};
}

}  // namespace

result<api::cluster_pages> api::cluster(const session& who, bool with_topology) {
  auto nodes = b_.typed<loom::v1::ListNodesReply>("scheduler", loom::v1::ListNodesRequest{}, who.token);
  if (!nodes) return nodes.err();
  auto jobs = b_.typed<loom::v1::ListJobsReply>("scheduler", loom::v1::ListJobsRequest{}, who.token);
  if (!jobs) return jobs.err();
  cluster_pages out{nullptr, overview_of(*nodes, *jobs)};
  if (!with_topology) return out;
  auto sites = b_.typed<loom::v1::ListSitesReply>("scheduler", loom::v1::ListSitesRequest{}, who.token);
  if (!sites) return sites.err();
  out.topology = topology_of(*sites, *nodes, *jobs, cloud_zone_);
  return out;
}

}  // namespace loom::console
