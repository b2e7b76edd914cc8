#include "libs/layout/layout.hpp"

#include "libs/files/confine.hpp"
#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <cstdlib>
#include <sys/stat.h>

namespace loom::layout {

bool is_service(std::string_view name) {
  for (auto s : service_names)
    if (s == name) return true;
  return false;
}

std::string binary_of(std::string_view service) { return "loom-" + std::string(service); }

std::string service_kind(std::string_view name) {
  if (is_service(name)) return std::string(name);
  auto dash = name.rfind('-');
  if (dash == std::string_view::npos || !is_service(name.substr(0, dash))) return "";
  auto k = name.substr(dash + 1);
  // K >= 2, written without a leading zero (so each instance has one name).
  if (k.empty() || k.size() > 9 || k[0] == '0' || (k.size() == 1 && k[0] == '1')) return "";
  for (char ch : k)
    if (ch < '0' || ch > '9') return "";
  return std::string(name.substr(0, dash));
}

std::string instance_name(std::string_view kind, int k) {
  return k <= 1 ? std::string(kind) : std::string(kind) + "-" + std::to_string(k);
}

bool cloud_service(std::string_view service) {
  return service == "scheduler" || service == "aggregator" || service == "console";
}

service_reach reach(const paths& p, const endpoints& e, std::string_view service) {
  if (e.is_site() && cloud_service(service)) return {p.cloud_keys_dir(), p.cloud_token()};
  return {p.curve_dir(), ""};
}

bool endpoints::runs_here(std::string_view service) const {
  if (is_site() && cloud_service(service)) return false;
  return only.empty() || std::find(only.begin(), only.end(), service) != only.end();
}

std::vector<std::string> process_names(const endpoints& e) {
  std::vector<std::string> out;
  for (auto s : service_names) {
    if (!e.runs_here(s)) continue;
    const int n = e.count_of(s);
    for (int k = 1; k <= n; ++k)
      if (s != "scheduler" || e.scheduler_replica == 0 || e.scheduler_replica == k) out.push_back(instance_name(s, k));
  }
  return out;
}

bool endpoints::runs_process(std::string_view name) const {
  const auto names = process_names(*this);
  return std::find(names.begin(), names.end(), name) != names.end();
}

int endpoints::count_of(std::string_view kind) const {
  return kind == "trainer" ? trainers : kind == "scheduler" ? scheduler_replicas : kind == "audit" ? audit_replicas : 1;
}

std::vector<const service_endpoint*> endpoints::instances(std::string_view kind) const {
  std::vector<std::pair<int, const service_endpoint*>> found;
  for (const auto& [name, ep] : services) {
    if (ep.rpc.empty() || service_kind(name) != kind) continue;
    const auto dash = name.rfind('-');
    found.emplace_back(name == kind ? 1 : std::atoi(name.c_str() + dash + 1), &ep);
  }
  std::sort(found.begin(), found.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<const service_endpoint*> out;
  for (const auto& f : found) out.push_back(f.second);
  return out;
}

std::vector<std::string> endpoints::rpc_endpoints(std::string_view kind) const {
  std::vector<std::string> out;
  for (const auto* ep : instances(kind)) out.push_back(ep->rpc);
  return out;
}

std::vector<std::string> endpoints::rpc_targets(std::string_view name) const {
  if (name == "scheduler" || name == "audit") return rpc_endpoints(name);
  const auto* ep = find(name);
  if (!ep || ep->rpc.empty()) return {};
  return {ep->rpc};
}

const service_endpoint* endpoints::find(std::string_view service) const {
  auto it = services.find(std::string(service));
  return it == services.end() ? nullptr : &it->second;
}

namespace {
std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}
// `a` is `b` or lies under it (both canonical).
bool under(const std::string& a, const std::string& b) {
  return b == "/" || a == b || (a.size() > b.size() && a.compare(0, b.size(), b) == 0 && a[b.size()] == '/');
}
}  // namespace

status check_import_root(const paths& p, const std::string& dir) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, "import root " + dir + ": " + why);
  };
  if (dir.empty() || dir.front() != '/') return bad("not an absolute path");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return bad("not an existing directory");
  std::error_code ec;  // the data dir may not exist yet (a first `loom up`): judged by where it will be
  const std::string root = real_path(dir);
  std::string data = std::filesystem::weakly_canonical(p.root, ec).string();
  while (data.size() > 1 && data.back() == '/') data.pop_back();
  if (ec || data.empty()) return bad("cannot tell where the data dir " + p.root + " is: " + ec.message());
  if (under(data, root))
    return bad("contains the data dir " + p.root + " (its keys and tokens); import from " + p.imports() +
               " or a directory beside the data dir");
  if (under(root, data))
    return bad("lies inside the data dir " + p.root + "; " + p.imports() + " is always an import root");
  return ok_status();
}

std::vector<std::string> import_roots(const paths& p, const endpoints& e, std::vector<std::string>* skipped) {
  std::vector<std::string> out{p.imports()};
  for (const auto& r : e.import_roots) {
    if (auto st = check_import_root(p, r); !st) {
      if (skipped) skipped->push_back(st.err().message);
      continue;
    }
    out.push_back(r);
  }
  return out;
}

std::vector<std::string> job_read_roots(const paths& p, const endpoints& e) {
  auto roots = import_roots(p, e);
  roots.push_back(p.jobs());
  return roots;
}

bool private_entry(std::string_view name) {
  static constexpr std::string_view exact[] = {"keys",   "admin.token", "endpoints.json", "cloud.json", "loom.lock",
                                               "audit",  "spool",       "logs",           "jobs",       "datasets",
                                               "peers.json"};
  if (name.empty() || name.front() == '.') return true;  // hidden: a service's lock or scratch
  for (auto e : exact)
    if (name == e) return true;
  // The stores and their journals (loom.db-wal, audit.db-shm, ...).
  if (name.starts_with("loom.db") || name.starts_with("audit.db")) return true;
  return is_service(name) || !service_kind(name).empty();  // a service's own state: scheduler/, trainer-2/
}

bool looks_like_data_dir(const std::string& dir) {
  struct stat st {};
  for (const char* marker : {"/keys/token.key", "/keys/curve", "/endpoints.json"})
    if (::stat((dir + marker).c_str(), &st) == 0) return true;
  return false;
}

namespace {
// The data dir rule for one canonical location `loc` of output `target`.
status private_rule(const paths& p, const std::string& target, const std::string& opt, const std::string& loc) {
  std::error_code ec;
  const std::string own = files::resolve_path(std::filesystem::absolute(p.root, ec).lexically_normal().string()).path;
  // The data dirs `loc` lies in: the command's own, and any found on the way up.
  std::vector<std::string> dirs{own};
  for (std::filesystem::path d(loc); d.has_relative_path(); d = d.parent_path())
    if (d.string() != own && looks_like_data_dir(d.string())) dirs.push_back(d.string());
  for (std::string d : dirs) {
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    if (loc == d)
      return make_error(errc::permission_denied, opt + " " + target + " is the data dir " + d +
                                                     ": no command writes over a data dir");
    if (!files::within(d, loc)) continue;
    const std::string rest = loc.substr(d == "/" ? 1 : d.size() + 1);
    const std::string entry = rest.substr(0, rest.find('/'));
    if (private_entry(entry))
      return make_error(errc::permission_denied,
                        opt + " " + target + " lies in " + d + "/" + entry +
                            ", which belongs to the data dir's services (keys, tokens, store, job outputs): no "
                            "command writes there, --force or not; choose a path outside it (" + d +
                            "/imports is the owner's)");
  }
  return ok_status();
}
}  // namespace

status check_output(const paths& p, const std::string& target, files::output_rules rules) {
  auto earlier = std::move(rules.refuse);
  const std::string opt = rules.option;
  rules.refuse = [&, earlier](const std::string& loc) -> status {
    if (earlier)
      if (auto st = earlier(loc); !st) return st;
    return private_rule(p, target, opt, loc);
  };
  return files::check_output(target, rules);
}

status check_not_private(const paths& p, const std::string& target, const std::string& option) {
  if (target.empty()) return make_error(errc::invalid_argument, option + " is empty");
  for (const auto& loc : files::output_locations(target))
    if (auto st = private_rule(p, target, option, loc); !st) return st;
  return ok_status();
}

result<endpoints> read_endpoints(const std::string& path, bool with_peers) {
  auto text = files::read_file(path);
  if (!text) return text.err();
  try {
    auto j = nlohmann::json::parse(*text);
    endpoints e;
    e.version = j.value("version", 1);
    e.role = j.value("role", std::string(role_cloud));
    if (e.role != role_cloud && e.role != role_site)
      return make_error(errc::corruption, path + ": \"role\" is " + e.role + ", expected cloud or site");
    e.zone = j.value("zone", std::string("local"));
    e.watcher_pid = j.value("watcher_pid", std::int64_t{0});
    e.trainers = j.value("trainers", 1);  // absent in files written before --trainers
    e.scheduler_replicas = j.value("scheduler_replicas", 1);  // absent before issue 30
    if (e.scheduler_replicas < 1 || e.scheduler_replicas > max_scheduler_replicas)
      return make_error(errc::corruption, path + ": \"scheduler_replicas\" is " + std::to_string(e.scheduler_replicas) +
                                              ", expected 1.." + std::to_string(max_scheduler_replicas));
    e.scheduler_replica = j.value("scheduler_replica", 0);  // absent: every replica here
    if (e.scheduler_replica < 0 || e.scheduler_replica > e.scheduler_replicas)
      return make_error(errc::corruption, path + ": \"scheduler_replica\" is " + std::to_string(e.scheduler_replica) +
                                              ", expected 1.." + std::to_string(e.scheduler_replicas));
    e.audit_replicas = j.value("audit_replicas", 1);  // absent before issue 30
    if (e.audit_replicas < 1 || e.audit_replicas > max_audit_replicas)
      return make_error(errc::corruption, path + ": \"audit_replicas\" is " + std::to_string(e.audit_replicas) +
                                              ", expected 1.." + std::to_string(max_audit_replicas));
    e.import_roots = j.value("import_roots", std::vector<std::string>{});
    e.only = j.value("only", std::vector<std::string>{});  // absent: every service
    for (const auto& o : e.only)
      if (std::find(service_names.begin(), service_names.end(), o) == service_names.end())
        return make_error(errc::corruption, path + ": \"only\" names " + o + ", which is no service");
    if (e.trainers < 1 || e.trainers > max_trainers)
      return make_error(errc::corruption, path + ": \"trainers\" is " + std::to_string(e.trainers) +
                                              ", expected 1.." + std::to_string(max_trainers));
    for (auto& [name, s] : j.at("services").items()) {
      service_endpoint se;
      se.rpc = s.value("rpc", std::string());
      se.metrics = s.value("metrics", std::string());
      se.pull = s.value("pull", std::string());
      se.pid = s.value("pid", std::int64_t{0});
      se.restarts = s.value("restarts", std::uint64_t{0});
      se.last_exit = s.value("last_exit", std::string());
      se.last_error = s.value("last_error", std::string());
      se.data = s.value("data", std::string());
      e.services[name] = se;
    }
    if (j.contains("network")) {
      const auto& n = j.at("network");
      e.net.listen = n.value("listen", e.net.listen);
      e.net.advertise = n.value("advertise", e.net.advertise);
      if (const auto ports = n.value("ports", std::string()); !ports.empty()) {
        auto range = parse_port_range(ports);
        if (!range) return make_error(errc::corruption, path + ": \"network\".\"ports\": " + range.err().message);
        e.net.first_port = range->first;
        e.net.last_port = range->second;
      }
      if (auto st = check_network(e.net); !st)
        return make_error(errc::corruption, path + ": \"network\": " + st.err().message);
    }
    if (with_peers && !e.only.empty()) {
      const std::string peers = (std::filesystem::path(path).parent_path() / "peers.json").string();
      auto p = read_endpoints(peers, false);
      if (!p && p.code() != errc::not_found) return p.err();
      if (p)
        for (const auto& [name, s] : p->services)
          if (!e.runs_process(name)) {
            e.services[name] = s;
            e.services[name].pid = 0;  // never this host's process
          }
    }
    return e;
  } catch (const std::exception& ex) {
    return make_error(errc::corruption, path + " is not a valid endpoints file: " + ex.what());
  }
}

status write_endpoints(const std::string& path, const endpoints& e) {
  nlohmann::json j;
  j["version"] = e.version;
  j["role"] = e.role;
  j["zone"] = e.zone;
  j["watcher_pid"] = e.watcher_pid;
  j["trainers"] = e.trainers;
  if (e.scheduler_replicas != 1) j["scheduler_replicas"] = e.scheduler_replicas;
  if (e.scheduler_replica != 0) j["scheduler_replica"] = e.scheduler_replica;
  if (e.audit_replicas != 1) j["audit_replicas"] = e.audit_replicas;
  j["import_roots"] = e.import_roots;
  if (!e.only.empty()) j["only"] = e.only;
  j["services"] = nlohmann::json::object();
  for (auto& [name, s] : e.services) {
    nlohmann::json o{{"rpc", s.rpc}, {"metrics", s.metrics}, {"pid", s.pid}};
    if (!s.pull.empty()) o["pull"] = s.pull;
    if (s.restarts) o["restarts"] = s.restarts;
    if (!s.last_exit.empty()) o["last_exit"] = s.last_exit;
    if (!s.last_error.empty()) o["last_error"] = s.last_error;
    if (!s.data.empty()) o["data"] = s.data;
    j["services"][name] = o;
  }
  if (!e.net.is_default()) {
    j["network"] = {{"listen", e.net.listen}, {"advertise", e.net.advertise}};
    if (e.net.has_range()) j["network"]["ports"] = e.net.ports();
  }
  return files::write_atomic(path, j.dump(2) + "\n", 0600);
}

std::string find_snapshot(const std::string& dir, int max_depth) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it.depth() >= max_depth) it.disable_recursion_pending();
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    const std::string name = it->path().filename().string();
    // step-<digits>, as libs/ckpt names a published snapshot.
    if (name.size() > 5 && name.rfind("step-", 0) == 0 &&
        name.find_first_not_of("0123456789", 5) == std::string::npos && fs::exists(it->path() / "MANIFEST.json", ec))
      return it->path().string();
  }
  return "";
}

}  // namespace loom::layout
