// `loom site token|revoke|list` on a cloud instance, and the dispatch to
// `loom site enrol` (site_enrol.cpp), which runs on the edge site's data dir.
// The registry is the cloud scheduler's (services/scheduler/sites); token and
// revoke need the admin role and are audited there, list any viewer.
#include "client/cli.hpp"
#include "client/typed_call.hpp"

#include "loom/v1/sites.pb.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>

namespace loom::cli {
namespace {
using nlohmann::json;

template <class M>
result<M> scheduler_call(context& c, const google::protobuf::Message& req) {
  // Never retried: a token request is not idempotent (a retry would mint a second one).
  return typed_call<M>(c, "scheduler", req, 0);
}

json site_json(const loom::v1::SiteInfo& s) {
  json keys = json::object(), trainers = json::array(), datasets = nullptr, link = nullptr;
  for (const auto& [service, key] : s.public_keys()) keys[service] = key;
  for (const auto& t : s.trainers())
    trainers.push_back({{"node", t.node()}, {"state", t.state()}, {"last_seen_unix_ns", t.last_seen_unix_ns()},
                        {"endpoint", t.endpoint()}});
  if (s.has_link())
    link = {{"rtt_ms", s.link().rtt_ms()}, {"bandwidth_bytes_per_s", s.link().bandwidth_bytes_per_s()},
            {"state", s.link().state()}};
  if (s.datasets_known()) {
    datasets = json::array();
    for (const auto& d : s.datasets()) datasets.push_back({{"name", d.name()}, {"bytes", d.bytes()}});
  }
  return {{"name", s.name()}, {"state", s.state()}, {"public_keys", keys}, {"trainers", trainers},
          {"created_unix_ns", s.created_unix_ns()}, {"enrolled_unix_ns", s.enrolled_unix_ns()},
          {"revoked_unix_ns", s.revoked_unix_ns()}, {"last_contact_unix_ns", s.last_contact_unix_ns()},
          {"link", link}, {"datasets", datasets}};
}

std::string trainers_text(const loom::v1::SiteInfo& s) {
  if (s.trainers_size() == 0) return "-";
  std::map<std::string, int> by_state;
  for (const auto& t : s.trainers()) ++by_state[t.state()];
  std::string out = std::to_string(s.trainers_size()) + " (";
  bool first = true;
  for (const auto& [state, n] : by_state) {
    out += (first ? "" : ", ") + std::to_string(n) + " " + state;
    first = false;
  }
  return out + ")";
}

std::string link_text(const loom::v1::SiteInfo& s) {
  if (!s.has_link()) return "-";
  char buf[96];
  if (s.link().bandwidth_bytes_per_s() <= 0)  // not measured yet: only its diloco trainer's deltas measure it
    std::snprintf(buf, sizeof buf, "%s %.1fms", s.link().state().c_str(), s.link().rtt_ms());
  else
    std::snprintf(buf, sizeof buf, "%s %.1fms %.1fMB/s", s.link().state().c_str(), s.link().rtt_ms(),
                  s.link().bandwidth_bytes_per_s() / 1e6);
  return buf;
}

std::string datasets_text(const loom::v1::SiteInfo& s) {
  if (!s.datasets_known()) return "-";
  std::string out;
  for (const auto& d : s.datasets())
    out += (out.empty() ? "" : ", ") + d.name() + " " +
           (d.bytes() < 1048576 ? std::to_string((d.bytes() + 1023) / 1024) + "KiB"
                                : std::to_string(d.bytes() / 1048576) + "MiB");
  return out.empty() ? "(none)" : out;
}

int cmd_site_token(context& c) {
  loom::v1::IssueSiteTokenRequest req;
  req.set_site(*c.a.get("site"));
  if (auto ttl = c.a.duration("ttl")) req.set_ttl_ms(static_cast<std::uint64_t>(ttl->count()));
  auto rep = scheduler_call<loom::v1::IssueSiteTokenReply>(c, req);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    print_json({{"site", rep->site()}, {"token", rep->token()}, {"expires_unix_ns", rep->expires_unix_ns()},
                {"cloud", rep->scheduler_endpoint()}});
    return ok_exit;
  }
  std::printf("%s\n", rep->token().c_str());
  std::fprintf(stderr,
               "one-time enrolment token for site %s, valid until %s; on the site's machine:\n"
               "  loom site enrol --site %s --cloud %s --enrol-token <the token above> --data-dir <the site's dir>\n",
               printable(rep->site()).c_str(), when(rep->expires_unix_ns()).c_str(), printable(rep->site()).c_str(),
               printable(rep->scheduler_endpoint()).c_str());
  return ok_exit;
}

int cmd_site_revoke(context& c) {
  loom::v1::RevokeSiteRequest req;
  req.set_site(c.a.positional.at(2));
  req.set_reason(c.a.get_or("reason", ""));
  auto rep = scheduler_call<loom::v1::RevokeSiteReply>(c, req);
  if (!rep) return fail(c, rep.err());
  if (c.json)
    print_json(site_json(rep->site()));
  else
    std::printf("site %s revoked: its keys are no longer admitted by the cloud's services\n",
                printable(rep->site().name()).c_str());
  return ok_exit;
}

int cmd_site_list(context& c) {
  auto rep = typed_call<loom::v1::ListSitesReply>(c, "scheduler", loom::v1::ListSitesRequest{}, 1);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    json arr = json::array();
    for (const auto& s : rep->sites()) arr.push_back(site_json(s));
    print_json({{"sites", arr}});
    return ok_exit;
  }
  std::printf("%-20s %-9s %-16s %-20s %-22s %-18s %s\n", "SITE", "STATE", "ADDRESS", "TRAINERS", "LAST_CONTACT", "LINK",
              "DATASETS");
  for (const auto& s : rep->sites()) {
    // Where its trainers registered from: the site's advertised address.
    const std::string address = s.trainers_size() ? layout::host_of(s.trainers(0).endpoint()) : std::string();
    std::printf("%-20s %-9s %-16s %-20s %-22s %-18s %s\n", printable(s.name()).c_str(), printable(s.state()).c_str(),
                address.empty() ? "-" : printable(address).c_str(), printable(trainers_text(s)).c_str(),
                when(s.last_contact_unix_ns()).c_str(), printable(link_text(s)).c_str(),
                printable(datasets_text(s)).c_str());
  }
  if (rep->sites_size() == 0) std::printf("(no sites: `loom site token --site NAME` starts one)\n");
  return ok_exit;
}

}  // namespace

int cmd_site(context& c) {
  static const std::map<std::string, int (*)(context&)> subcommands = {
      {"token", cmd_site_token}, {"revoke", cmd_site_revoke}, {"list", cmd_site_list}, {"enrol", cmd_site_enrol}};
  auto it = c.a.positional.size() < 2 ? subcommands.end() : subcommands.find(c.a.positional[1]);
  if (it == subcommands.end())
    return usage("usage: loom site token --site NAME [--ttl S] | revoke NAME [--reason TEXT] | list\n"
                 "       loom site enrol --site NAME --cloud tcp://HOST:PORT --enrol-token T   (on the site)");
  return it->second(c);
}

}  // namespace loom::cli
