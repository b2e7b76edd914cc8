// The scheduler's edge-site requests (issue 15 item 1): decode, call the
// registry (site_registry.hpp), audit the named site event, reply. Part of
// scheduler_logic; runs on the service actor's thread. The gateway records
// each request too; the named events (site.token, site.revoke, site.enrol,
// site.enrol.refused) say what happened to which site and never carry a
// token.
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/sites/link_state.hpp"
#include "services/scheduler/store_replies.hpp"

#include "libs/auth/identity.hpp"
#include "libs/auth/token.hpp"
#include "libs/runtime/admission.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/sites.pb.h"
#include "services/scheduler/sites/site_registry.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace loom::scheduler {
namespace {
using namespace loom::runtime;

std::uint64_t ns(time_point t) {
  auto v = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

// An enrolled site's bearer token: long, as its CURVE key is what binds it
// (a revoked site's key is refused before any token is read); enrolling again renews it.
constexpr auto site_token_ttl = std::chrono::hours(24 * 30);

handled no_sites() {
  return fail(errc::unimplemented, "this scheduler keeps no sites registry (no state store)");
}

nlohmann::json service_names(const std::map<std::string, std::string>& keys) {
  auto out = nlohmann::json::array();
  for (const auto& [service, key] : keys) out.push_back(service);
  return out;
}
}  // namespace

status scheduler_logic::zone_binding(const std::string& peer, const std::string& zone) {
  const std::string_view prefix = runtime::site_principal_prefix;
  if (peer.starts_with(prefix)) {  // site:<site>:<service>
    const auto end = peer.find(':', prefix.size());
    const std::string site = peer.substr(prefix.size(), end == std::string::npos ? end : end - prefix.size());
    if (zone != site)
      return make_error(errc::permission_denied, "CURVE key " + peer + " is edge site " + site +
                                                     "'s: its nodes are in zone " + site + ", not " +
                                                     auth::printable(zone));
    return ok_status();
  }
  if (!sites_) return ok_status();
  auto is_site = sites_->has_site(zone);
  if (!is_site) return make_error(errc::unavailable, "state store: " + is_site.err().message);
  if (*is_site)
    return make_error(errc::permission_denied, "zone " + zone + " is edge site " + zone +
                                                   "'s: only its enrolled keys speak for its nodes");
  return ok_status();
}

void scheduler_logic::set_sites(std::unique_ptr<site_registry> sites, site_sink sink) {
  sites_ = std::move(sites);
  site_sink_ = std::move(sink);
  if (!sites_) {
    jobs_.set_site_states({});
    return;
  }
  // A diloco stage names only enrolled sites (refused at submit otherwise).
  jobs_.set_site_states([this]() -> result<std::map<std::string, std::string>> {
    auto all = sites_->list();
    if (!all) return all.err();
    std::map<std::string, std::string> out;
    for (const auto& s : *all) out[s.name] = s.state;
    return out;
  });
  // Sites revoked while a job of theirs ran (a crash between the two, or a
  // scheduler older than this rule): those jobs fail now, naming the site.
  auto all = sites_->list();
  if (!all) {
    std::fprintf(stderr, "loom-scheduler: the sites registry: %s\n", all.err().to_string().c_str());
    return;
  }
  for (const auto& s : *all)
    if (s.state == "revoked") jobs_.site_revoked(s.name, s.revoke_reason, now_());
  finish_batch();  // those jobs' writes have no caller waiting
}

void scheduler_logic::describe(const site_rec& s, loom::v1::SiteInfo* o) const {
  o->set_name(s.name);
  o->set_state(s.state);
  for (const auto& [service, key] : s.keys) (*o->mutable_public_keys())[service] = key;
  o->set_created_unix_ns(ns(s.created));
  o->set_enrolled_unix_ns(ns(s.enrolled));
  o->set_revoked_unix_ns(ns(s.revoked));
  auto last = s.last_contact;
  const auto now = now_();
  for (const auto& n : roster_.list(s.name)) {  // the site's zone
    last = std::max(last, n.last_seen);
    if (n.service != "trainer") continue;
    auto* t = o->add_trainers();
    t->set_node(n.id);
    t->set_state(n.draining ? "draining" : to_string(roster_.state(n, now)));
    t->set_last_seen_unix_ns(ns(n.last_seen));
    t->set_endpoint(n.endpoint);
  }
  o->set_last_contact_unix_ns(ns(last));
  // Link state and datasets: what the site's nodes reported with their heartbeats (site_report).
  if (auto l = nlohmann::json::parse(s.link_json, nullptr, false); l.is_object()) {
    auto* link = o->mutable_link();
    link->set_rtt_ms(l.value("rtt_ms", 0.0));
    link->set_bandwidth_bytes_per_s(l.value("bandwidth_bytes_per_s", 0.0));
    // What the site reported, made degraded and then down by its silence (link_state.hpp).
    link->set_state(cloud_link_state(l.value("state", std::string("unknown")),
                                     std::chrono::duration_cast<std::chrono::milliseconds>(now - last),
                                     roster_.interval()));
  }
  auto ds = nlohmann::json::parse(s.datasets_json, nullptr, false);
  o->set_datasets_known(ds.is_array());
  if (ds.is_array())
    for (const auto& d : ds) {
      auto* x = o->add_datasets();
      x->set_name(d.value("name", std::string()));
      x->set_bytes(d.value("bytes", std::uint64_t{0}));
    }
}

void scheduler_logic::site_report(const loom::v1::NodeHeartbeatRequest& req, const std::string& peer) {
  const std::string_view prefix = runtime::site_principal_prefix;
  if (!sites_ || !peer.starts_with(prefix) || !req.has_link()) return;
  const auto end = peer.find(':', prefix.size());
  const std::string site = peer.substr(prefix.size(), end == std::string::npos ? end : end - prefix.size());
  const auto link = nlohmann::json{{"rtt_ms", req.link().rtt_ms()},
                                   {"bandwidth_bytes_per_s", req.link().bandwidth_bytes_per_s()},
                                   {"state", auth::printable(req.link().state())}};
  std::string datasets;
  if (req.datasets_known()) {
    auto arr = nlohmann::json::array();
    for (const auto& d : req.datasets()) arr.push_back({{"name", auth::printable(d.name())}, {"bytes", d.bytes()}});
    datasets = arr.dump();
  }
  if (auto st = sites_->report(site, link.dump(), datasets); !st)
    std::fprintf(stderr, "loom-scheduler: site %s's report: %s\n", site.c_str(), st.err().to_string().c_str());
}

handled scheduler_logic::issue_site_token(const loom::v1::IssueSiteTokenRequest& req, const call_context& ctx) {
  if (!sites_) return no_sites();
  if (req.ttl_ms() > static_cast<std::uint64_t>(site_registry::max_ttl.count()))
    return fail(errc::invalid_argument, "IssueSiteToken: an enrolment token lives at most 7 days");
  auto r = sites_->issue_token(req.site(), std::chrono::milliseconds(req.ttl_ms()), ctx.principal);
  if (!r) return refused_or_store(r.err());
  const auto payload = nlohmann::json{{"site", req.site()}, {"expires_unix_ns", ns(r->expires)}}.dump();
  if (site_sink_) site_sink_({"site.token", req.site(), ctx.principal, ctx.role, "", payload});
  loom::v1::IssueSiteTokenReply rep;
  rep.set_site(req.site());
  rep.set_token(r->token);
  rep.set_expires_unix_ns(ns(r->expires));
  rep.set_scheduler_endpoint(sites_->cloud().scheduler_endpoint);
  auto h = reply(rep);
  h.audit_payload = payload;
  return h;
}

handled scheduler_logic::revoke_site(const loom::v1::RevokeSiteRequest& req, const call_context& ctx) {
  if (!sites_) return no_sites();
  auto r = sites_->revoke(req.site(), req.reason());
  if (!r) return refused_or_store(r.err());
  jobs_.site_revoked(r->name, req.reason(), now_());  // its running jobs fail, naming it; its trainers are released
  const auto payload = nlohmann::json{{"site", req.site()}, {"reason", req.reason()}}.dump();
  if (site_sink_) site_sink_({"site.revoke", req.site(), ctx.principal, ctx.role, req.reason(), payload});
  loom::v1::RevokeSiteReply rep;
  describe(*r, rep.mutable_site());
  auto h = reply(rep);
  h.audit_payload = payload;
  return h;
}

handled scheduler_logic::list_sites(const loom::v1::ListSitesRequest&) {
  if (!sites_) return no_sites();
  auto all = sites_->list();
  if (!all) return refused_or_store(all.err());
  loom::v1::ListSitesReply rep;
  for (const auto& s : *all) describe(s, rep.add_sites());
  return reply(rep);
}

handled scheduler_logic::site_keys(const loom::v1::SiteKeysRequest&, const runtime::call_context& ctx) {
  const auto p = auth::parse_peer(ctx.peer);
  if (p.kind != auth::peer_kind::own_service)
    return fail(errc::permission_denied,
                "SiteKeys is sent only by this deployment's own services (their CURVE keys), which admit the sites "
                "by them; this call came with key \"" + auth::printable(ctx.peer) + "\"");
  if (!sites_) return no_sites();
  auto all = sites_->list();
  if (!all) return refused_or_store(all.err());
  loom::v1::SiteKeysReply rep;
  for (const auto& k : enrolled_keys(*all)) {
    auto* o = rep.add_keys();
    o->set_site(k.site);
    o->set_service(k.service);
    o->set_public_key(k.key);
  }
  return reply(rep);
}

handled scheduler_logic::enrol_site(const loom::v1::EnrolSiteRequest& req) {
  if (!sites_) return no_sites();
  const std::map<std::string, std::string> keys(req.public_keys().begin(), req.public_keys().end());
  // Valid or not, the name is quoted in the record; an empty one names no principal.
  const std::string principal = req.site().empty() ? "" : "site:" + auth::printable(req.site());
  auto payload = nlohmann::json{{"site", req.site()}, {"services", service_names(keys)}};
  auto r = sites_->enrol(req.site(), req.token(), keys);
  if (!r) {
    if (site_sink_ && r.code() != errc::unavailable)
      site_sink_({"site.enrol.refused", req.site(), principal, "", r.err().message, payload.dump(), true});
    return refused_or_store(r.err());
  }
  if (site_sink_) site_sink_({"site.enrol", req.site(), principal, "", "", payload.dump()});
  loom::v1::EnrolSiteReply rep;
  rep.set_site(r->name);
  rep.set_cloud_zone(sites_->cloud().zone);
  // The site's bearer token for the cloud's services: its keys are already
  // bound to its zone (zone_binding); the token lets its calls through the
  // gateways' role policy (operator) in its zone and the cloud's.
  if (!sites_->cloud().token_key.empty()) {
    const auto unix_now = std::chrono::duration_cast<std::chrono::seconds>(now_().time_since_epoch()).count();
    auto epoch = auth::read_epoch(sites_->cloud().epoch_file);
    const std::int64_t expires = unix_now + std::chrono::duration_cast<std::chrono::seconds>(site_token_ttl).count();
    auth::claims cl{"site:" + r->name, auth::role::operator_, {r->name, sites_->cloud().zone}, expires,
                    epoch ? *epoch : 0, unix_now};
    if (auto t = auth::issue_token(cl, sites_->cloud().token_key)) {
      rep.set_token(*t);
      rep.set_token_expires_unix_ns(static_cast<std::uint64_t>(expires) * 1'000'000'000ull);
    }
  }
  for (const auto& c : sites_->cloud_services()) {
    auto* s = rep.add_services();
    s->set_name(c.name);
    s->set_endpoint(c.endpoint);
    s->set_public_key(c.public_key);
    s->set_pull(c.pull);
  }
  auto h = reply(rep);
  h.audit_payload = payload.dump();
  return h;
}

}  // namespace loom::scheduler
