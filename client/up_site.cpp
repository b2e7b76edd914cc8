// `loom up --site NAME --cloud EP [--enrol-token T]` (issue 15): the options
// that make this deployment an edge site of a cloud. The launcher (launcher.cpp)
// asks plan_site, then writes endpoints.json with role "site", zone NAME and
// the cloud's scheduler and aggregator endpoints (site_enrol.hpp).
#include "client/site_enrol.hpp"

#include "libs/auth/site_token.hpp"
#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

namespace loom::cli {

status check_site_options(const context& c, const layout::endpoints& previous) {
  const auto site_opt = c.a.get("site"), cloud_opt = c.a.get("cloud"), token_opt = c.a.get("enrol-token");
  if (!site_opt && !previous.is_site()) {
    if (cloud_opt || token_opt)
      return make_error(errc::invalid_argument, "--cloud and --enrol-token need --site NAME (an edge site)");
    return ok_status();
  }
  if (site_opt && c.a.get("zone") && *c.a.get("zone") != *site_opt)
    return make_error(errc::invalid_argument, "--zone " + *c.a.get("zone") + ": an edge site's zone is its name (" +
                                                  *site_opt + "); leave --zone out");
  const std::string site = site_opt ? *site_opt : previous.zone;
  if (auto st = auth::validate_site_name(site); !st) return make_error(errc::invalid_argument, "--site: " + st.err().message);
  if (token_opt && cloud_opt) return check_enrol_options(site, *cloud_opt, *token_opt);
  return ok_status();
}

result<std::optional<site_plan>> plan_site(context& c, const layout::endpoints& previous, const caller& admin) {
  const auto site_opt = c.a.get("site"), cloud_opt = c.a.get("cloud"), token_opt = c.a.get("enrol-token");
  if (!site_opt && !previous.is_site()) return std::optional<site_plan>{};
  const std::string site = site_opt ? *site_opt : previous.zone;

  auto text = files::read_file(c.paths.cloud());
  if (!text && text.code() == errc::not_found) {
    if (!token_opt || !cloud_opt)
      return make_error(errc::not_found, c.paths.root + " is not enrolled with a cloud (no " + c.paths.cloud() +
                                             "): give --cloud tcp://HOST:PORT --enrol-token T (from `loom site token` "
                                             "on the cloud), or run `loom site enrol` first");
    auto done = enrol_site(c, site, *cloud_opt, *token_opt, admin);
    if (!done) return done.err();
    if (!c.json)
      std::printf("enrolled %s as site %s of the cloud at %s\n", printable(c.paths.root).c_str(), site.c_str(),
                  printable(*cloud_opt).c_str());
    text = files::read_file(c.paths.cloud());
  }
  if (!text) return text.err();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("services") || !j["services"].is_object())
    return make_error(errc::corruption, c.paths.cloud() + " is not a cloud file (enrol again: `loom site enrol`)");
  if (j.value("site", "") != site)
    return make_error(errc::conflict, c.paths.root + " is enrolled as site " + j.value("site", std::string("?")) +
                                          ", not " + site + " (" + c.paths.cloud() + "); a data dir is one site");
  if (cloud_opt && *cloud_opt != j.value("cloud", ""))
    std::fprintf(stderr, "note: %s names the cloud at %s; --cloud %s is used only to enrol\n", c.paths.cloud().c_str(),
                 j.value("cloud", std::string()).c_str(), cloud_opt->c_str());
  site_plan plan{site, {}};
  for (const auto service : {"scheduler", "aggregator"}) {
    const auto& s = j["services"];
    if (!s.contains(service) || !s[service].is_object() || s[service].value("endpoint", "").empty()) {
      if (std::string(service) == "scheduler")
        return make_error(errc::corruption, c.paths.cloud() + " names no cloud scheduler endpoint");
      continue;  // a cloud without an aggregator: diloco stages fail there, with a message
    }
    plan.cloud_rpc[service] = s[service].value("endpoint", "");
  }
  if (!files::read_file(c.paths.cloud_token()))
    std::fprintf(stderr, "warning: no %s: the cloud may refuse this site's calls (enrol again for a token)\n",
                 c.paths.cloud_token().c_str());
  return std::optional<site_plan>{std::move(plan)};
}

}  // namespace loom::cli
