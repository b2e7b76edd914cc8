// `loom init`: guided set-up of a data dir, the same answers `loom up` would
// take as flags, asked for on a terminal or given as flags with --yes:
//   cloud or site (--site NAME --cloud EP --enrol-token T: enrolled now),
//   zone, addresses (--listen/--advertise/--ports), trainers, import roots,
//   the store (SQLite in the data dir, or --database postgresql://..., which
//   is connected to before anything is saved), keys and the first admin
//   token, and the template the first job will use (checked to exist).
// Every answer is checked before anything is written; then each item is
// created, changed or left as it was — a second run with the same answers
// writes nothing. The store URL goes to <data>/database.url (0600), which
// `loom up` exports as LOOM_DATABASE_URL when the environment has none.
#include "client/cli.hpp"
#include "client/lifecycle.hpp"
#include "client/options.hpp"
#include "client/site_enrol.hpp"
#include "client/templates.hpp"
#include "client/up_network.hpp"

#include "libs/files/files.hpp"
#include "libs/store/database.hpp"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

namespace loom::cli {

std::string saved_database_path(const layout::paths& p) { return p.root + "/database.url"; }

void use_saved_database(const layout::paths& p) {
  if (const char* set = std::getenv("LOOM_DATABASE_URL"); set && *set) return;  // the environment's wins
  auto url = files::read_file(saved_database_path(p));
  if (!url) return;
  std::string u = *url;
  while (!u.empty() && (u.back() == '\n' || u.back() == ' ')) u.pop_back();
  if (!u.empty()) ::setenv("LOOM_DATABASE_URL", u.c_str(), 1);
}

namespace {

using nlohmann::json;
constexpr const char* default_template = "pretrain-tiny";

struct item {
  std::string what, state, detail;  // state: created, changed, unchanged
};

// An answer typed at the prompt, checked as the flag would be, then kept as if given.
status set_answer(context& c, const std::string& name, const std::string& value) {
  for (const auto& o : c.a.command->options) {
    if (o.name != name) continue;
    auto v = check_value(o, value);
    if (!v) return v.err();
    c.a.options[name] = value;
    c.a.values[name] = *v;
    c.a.repeated[name].push_back(value);
    return ok_status();
  }
  return make_error(errc::internal, "no option --" + name);
}

// On a terminal: each answer not given as a flag, with its default ("" leaves it unset).
status ask_missing(context& c, const layout::endpoints& previous) {
  auto ask = [&](const std::string& name, const std::string& question, const std::string& fallback) -> status {
    if (c.a.get(name)) return ok_status();
    std::printf("%s%s: ", question.c_str(), fallback.empty() ? "" : (" [" + fallback + "]").c_str());
    std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line)) line.clear();
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    const std::string answer = line.empty() ? fallback : line;
    return answer.empty() ? ok_status() : set_answer(c, name, answer);
  };
  std::printf("EdgeLoom set-up of %s (Enter keeps the value in brackets)\n", printable(c.paths.root).c_str());
  std::string role = c.a.get("site") || previous.is_site() ? "site" : "cloud";
  if (!c.a.get("site")) {
    std::printf("cloud or site [%s]: ", role.c_str());
    std::fflush(stdout);
    std::string line;
    if (std::getline(std::cin, line) && !line.empty()) role = line;
    if (role != "cloud" && role != "site") return make_error(errc::invalid_argument, "answer cloud or site, not " + role);
  }
  if (role == "site") {
    if (auto st = ask("site", "this site's name", previous.is_site() ? previous.zone : ""); !st) return st;
    if (!files::read_file(c.paths.cloud())) {
      if (auto st = ask("cloud", "the cloud scheduler (tcp://HOST:PORT)", ""); !st) return st;
      if (auto st = ask("enrol-token", "the enrolment token (`loom site token --site NAME` on the cloud)", ""); !st)
        return st;
    }
  } else if (auto st = ask("zone", "zone", previous.zone); !st) {
    return st;
  }
  if (auto st = ask("listen", "listen address (127.0.0.1, 0.0.0.0 or one of this host's)", previous.net.listen); !st)
    return st;
  if (c.a.get_or("listen", "127.0.0.1") != "127.0.0.1")
    if (auto st = ask("advertise", "the address other hosts reach this one at", previous.net.advertise); !st) return st;
  if (auto st = ask("ports", "port range FIRST-LAST (empty: any free port)", previous.net.ports()); !st) return st;
  if (auto st = ask("trainers", "trainer processes", std::to_string(previous.trainers)); !st) return st;
  if (auto st = ask("database", "store: sqlite, or a postgresql:// URL", "sqlite"); !st) return st;
  return ask("template", "template of the first job (`loom templates` lists them)", default_template);
}

// The store the answers name: "" for SQLite in the data dir; a PostgreSQL URL
// connected to (and closed) first — invalid_argument or the connection's error, naming the masked URL.
result<std::string> checked_database(const context& c) {
  const std::string url = c.a.get_or("database", "sqlite");
  if (url == "sqlite") return std::string();
  if (!url.starts_with("postgresql://") && !url.starts_with("postgres://"))
    return make_error(errc::invalid_argument, "--database " + store::mask_url(url) +
                                                  ": give sqlite (the data dir's own file) or a postgresql:// URL");
  auto db = store::database::open(url);
  if (!db) return make_error(db.code(), "--database " + store::mask_url(url) + ": " + db.err().message);
  return url;
}

// Writes `text` to `path` (mode 0600) unless it already holds it: created, changed or unchanged.
result<std::string> put(const std::string& path, const std::string& text) {
  auto old = files::read_file(path);
  if (old && *old == text) return std::string("unchanged");
  if (auto st = files::write_atomic(path, text, 0600); !st) return st.err();
  return std::string(old ? "changed" : "created");
}

}  // namespace

int cmd_init(context& c) {
  const auto t0 = std::chrono::steady_clock::now();
  auto previous = layout::read_endpoints(c.paths.endpoints());
  const layout::endpoints was = previous ? *previous : layout::endpoints{};
  const bool interactive = !c.a.flag("yes") && ::isatty(0) && ::isatty(1) && !c.json;
  if (!interactive && !c.a.flag("yes"))
    return usage("loom init: not on a terminal: give --yes, with the answers as flags (loom init --help)");
  if (interactive)
    if (auto st = ask_missing(c, was); !st) return usage("loom init: " + printable(st.err().message));

  // Every answer checked before anything is written.
  if (auto st = check_site_options(c, was); !st) return usage("loom init: " + printable(st.err().message));
  auto net = network_option(c, was.net);
  if (!net) return usage("loom init: " + printable(net.err().message));
  auto roots = import_roots_option(c);
  if (!roots) return usage("loom init: " + printable(roots.err().message));
  const std::string tname = c.a.get_or("template", default_template);
  auto tmpl = find_template(c, tname);
  if (!tmpl) return fail(c, tmpl.err());
  auto database = checked_database(c);
  if (!database) return fail(c, database.err());

  layout::endpoints e = was;
  const bool site = c.a.get("site").has_value() || was.is_site();
  e.role = site ? std::string(layout::role_site) : std::string(layout::role_cloud);
  if (auto s = c.a.get("site")) e.zone = *s;
  else if (auto z = c.a.get("zone")) e.zone = *z;
  if (auto n = c.a.number("trainers")) e.trainers = static_cast<int>(*n);
  e.net = *net;
  if (!roots->empty()) e.import_roots = *roots;
  const bool endpoints_differ = !previous || e.role != was.role || e.zone != was.zone || e.trainers != was.trainers ||
                                e.net.listen != was.net.listen || e.net.advertise != was.net.advertise ||
                                e.net.first_port != was.net.first_port || e.net.last_port != was.net.last_port ||
                                e.import_roots != was.import_roots;
  if (endpoints_differ && was.watcher_pid > 0 && ::kill(static_cast<pid_t>(was.watcher_pid), 0) == 0)
    return fail(c, make_error(errc::conflict, "the deployment in " + c.paths.root +
                                                  " is running: `loom down` before changing its set-up"));

  std::vector<item> done;
  const bool fresh = !std::filesystem::exists(c.paths.root);
  if (auto st = files::make_dirs(c.paths.root, 0700); !st) return fail(c, st.err());
  done.push_back({"data dir", fresh ? "created" : "unchanged", c.paths.root});
  const bool had_keys = std::filesystem::exists(c.paths.token_key()) && std::filesystem::exists(c.paths.admin_token());
  if (auto st = ensure_keys(c.paths); !st) return fail(c, st.err());
  done.push_back({"keys", had_keys ? "unchanged" : "created", c.paths.root + "/keys"});
  done.push_back({"admin token", had_keys ? "unchanged" : "created", c.paths.admin_token()});
  if (endpoints_differ)
    if (auto st = layout::write_endpoints(c.paths.endpoints(), e); !st) return fail(c, st.err());
  done.push_back({"set-up", !previous ? "created" : endpoints_differ ? "changed" : "unchanged",
                  e.role + ", zone " + e.zone + ", " + std::to_string(e.trainers) + " trainer(s), listen " + e.net.listen +
                      (e.net.has_range() ? ", ports " + e.net.ports() : std::string())});
  if (database->empty()) {
    std::error_code ec;
    const bool removed = std::filesystem::remove(saved_database_path(c.paths), ec);
    done.push_back({"store", removed ? "changed" : "unchanged", "SQLite in the data dir"});
  } else {
    auto st = put(saved_database_path(c.paths), *database + "\n");
    if (!st) return fail(c, st.err());
    done.push_back({"store", *st, store::mask_url(*database) + " (connected)"});
  }
  auto chosen = put(c.paths.root + "/init.json", json{{"template", tmpl->name}}.dump(1) + "\n");
  if (!chosen) return fail(c, chosen.err());
  done.push_back({"template", *chosen, tmpl->name + " (" + tmpl->path + ")"});
  if (site) {  // enrolled now when it is not yet (the cloud checks the token), else as it was
    const bool enrolled = files::read_file(c.paths.cloud()).ok();
    auto admin = require_admin(c, "loom init");
    if (!admin) return fail(c, admin.err());
    auto plan = plan_site(c, e, *admin);
    if (!plan) return fail(c, plan.err());
    done.push_back({"enrolment", enrolled ? "unchanged" : "created", c.paths.cloud()});
  }
  bool changed = false;
  for (const auto& d : done) changed = changed || d.state != "unchanged";
  if (changed) {
    std::string what;
    for (const auto& d : done)
      if (d.state != "unchanged") what += (what.empty() ? "" : ", ") + d.what + " " + d.state;
    // Spooled now, delivered by the next command that finds the audit service running (none runs yet).
    audit_local(c, {"loom.init", {"local:init", "admin"}, audit::decision::allow, "", what}, std::chrono::milliseconds(0));
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  const std::string dd = " --data-dir " + c.paths.root;
  std::vector<std::string> next = {"loom up" + dd, "loom data import FILE --dataset NAME" + dd,
                                   "loom job submit --template " + tmpl->name + " --set dataset=NAME" + dd};
  if (!site) next.push_back("loom site token --site NAME" + dd + "   (for each edge site)");
  if (c.json) {
    json items = json::array();
    for (const auto& d : done) items.push_back({{"item", d.what}, {"state", d.state}, {"detail", d.detail}});
    print_json({{"data_dir", c.paths.root}, {"changed", changed}, {"items", items}, {"next", next}, {"ms", ms}});
    return ok_exit;
  }
  for (const auto& d : done)
    std::printf("%-12s %-9s %s\n", d.what.c_str(), d.state.c_str(), printable(d.detail).c_str());
  std::printf("%s in %.0f ms. Next:\n", changed ? "set up" : "nothing to change", ms);
  for (const auto& n : next) std::printf("  %s\n", printable(n).c_str());
  return ok_exit;
}

}  // namespace loom::cli
