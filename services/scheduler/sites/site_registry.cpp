#include "services/scheduler/sites/site_registry.hpp"

#include "libs/auth/site_token.hpp"
#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/runtime/site_keys.hpp"
#include "libs/store/database.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <set>

namespace loom::scheduler {
namespace {

// A site announces at most this many services (audit, scheduler, ingest,
// trainer, aggregator, client and room to grow): more is not a site.
constexpr std::size_t max_site_services = 16;

error refused(const std::string& why) { return error{errc::permission_denied, why}; }

// A link record's bandwidth (0 when none), and the record with `bw` in it.
double bandwidth_of(const std::string& link_json) {
  auto l = nlohmann::json::parse(link_json, nullptr, false);
  return l.is_object() ? l.value("bandwidth_bytes_per_s", 0.0) : 0.0;
}
std::string with_bandwidth(nlohmann::json link, double bw) {
  link["bandwidth_bytes_per_s"] = bw;
  return link.dump();
}
}  // namespace

site_registry::site_registry(store::database* db, clock_fn now, cloud_info cloud, std::string keys_dir,
                             wire::allow_list own_keys, std::function<void()> keys_changed)
    : db_(db),
      now_(std::move(now)),
      cloud_(std::move(cloud)),
      keys_dir_(std::move(keys_dir)),
      own_keys_(std::move(own_keys)),
      keys_changed_(std::move(keys_changed)) {}

status site_registry::sync_key_files() {
  auto sites = db_->with_read_transaction([](store::transaction& tx) { return load_sites(tx); });
  if (!sites) return sites.err();
  return runtime::write_site_keys(keys_dir_, enrolled_keys(*sites));
}

std::vector<runtime::site_key> enrolled_keys(const std::vector<site_rec>& sites) {
  std::vector<runtime::site_key> out;
  for (const auto& s : sites)
    if (s.state == "enrolled")
      for (const auto& [service, key] : s.keys) out.push_back({s.name, service, key});
  return out;
}

status site_registry::after_keys_changed() {
  auto st = sync_key_files();
  if (keys_changed_) keys_changed_();
  return st;
}

status site_registry::check_keys(const std::map<std::string, std::string>& keys) const {
  if (keys.empty()) return make_error(errc::invalid_argument, "EnrolSite: no public keys");
  if (keys.size() > max_site_services)
    return make_error(errc::invalid_argument, "EnrolSite: " + std::to_string(keys.size()) + " keys (at most " +
                                                  std::to_string(max_site_services) + ")");
  std::set<std::string> seen;
  for (const auto& [service, key] : keys) {
    if (auto st = runtime::check_site_service_name(service); !st) return st;
    if (!wire::valid_z85_key(key))
      return make_error(errc::invalid_argument, "EnrolSite: the key of " + service + " is not a CURVE public key");
    if (!seen.insert(key).second)
      return make_error(errc::invalid_argument, "EnrolSite: two services share the key of " + service);
    if (own_keys_.count(key))
      return make_error(errc::invalid_argument, "EnrolSite: the key of " + service + " is one of the cloud's own");
  }
  return ok_status();
}

result<site_registry::issued> site_registry::issue_token(const std::string& site, std::chrono::milliseconds ttl,
                                                         const std::string& issued_by) {
  if (auto st = auth::validate_site_name(site); !st) return st.err();
  if (site == cloud_.zone)
    return make_error(errc::invalid_argument, "site name " + site + " is the cloud's own zone");
  if (ttl.count() == 0) ttl = default_ttl;
  if (ttl > max_ttl) return make_error(errc::invalid_argument, "an enrolment token lives at most 7 days");
  auto key = wire::key_bytes(cloud_.scheduler_key);
  if (!key) return key.err();
  const std::string text = auth::make_enrol_token(*key);
  const auto now = now_();
  issued out{text, now + ttl};
  auto st = db_->with_transaction([&](store::transaction& tx) -> status {
    auto found = find_site(tx, site);
    if (!found) return found.err();
    if (*found && (*found)->state == "revoked")
      return make_error(errc::conflict, "site " + site + " was revoked; a revoked site does not come back (enrol it "
                                                         "under another name)");
    if (auto s = ensure_site(tx, site, now); !s) return s;
    return insert_site_token(tx, auth::enrol_token_hash(*auth::parse_enrol_token(text)), site, issued_by, now,
                             out.expires);
  });
  if (!st) return st.err();
  if (names_) names_->insert(site);
  return out;
}

result<site_rec> site_registry::enrol(const std::string& site, const std::string& token,
                                      const std::map<std::string, std::string>& keys) {
  if (auto st = auth::validate_site_name(site); !st) return st.err();
  auto parsed = auth::parse_enrol_token(token);
  if (!parsed) return refused("the enrolment token is malformed: " + parsed.err().message);
  auto ours = wire::key_bytes(cloud_.scheduler_key);
  if (!ours || parsed->cloud_key_raw != *ours) return refused("the enrolment token was issued by another cloud");
  if (auto st = check_keys(keys); !st) return st.err();
  const auto now = now_();
  const std::string hash = auth::enrol_token_hash(*parsed);
  auto rec = db_->with_transaction([&](store::transaction& tx) -> result<site_rec> {
    auto t = find_site_token(tx, hash);
    if (!t) return t.err();
    if (!*t) return refused("unknown enrolment token");
    if ((*t)->site != site) return refused("the enrolment token is not for site " + site);
    auto s = find_site(tx, site);
    if (!s) return s.err();
    if (*s && (*s)->state == "revoked") return refused("site " + site + " is revoked");
    if ((*t)->used) return refused("the enrolment token was used already");
    if (now >= (*t)->expires) return refused("the enrolment token expired");
    auto used = use_site_token(tx, hash, now);
    if (!used) return used.err();
    if (!*used) return refused("the enrolment token was used already");
    if (auto st = replace_site_keys(tx, site, keys); !st)
      return st.code() == errc::already_exists ? make_error(errc::invalid_argument, st.err().message) : st.err();
    if (auto st = mark_site_enrolled(tx, site, now); !st) return st.err();
    auto back = find_site(tx, site);
    if (!back) return back.err();
    return **back;
  });
  if (!rec) return rec.err();
  if (auto st = after_keys_changed(); !st) return st.err();
  return rec;
}

result<site_rec> site_registry::revoke(const std::string& site, const std::string& reason) {
  if (auto st = auth::validate_site_name(site); !st) return st.err();
  const auto now = now_();
  auto rec = db_->with_transaction([&](store::transaction& tx) -> result<site_rec> {
    auto s = find_site(tx, site);
    if (!s) return s.err();
    if (!*s) return make_error(errc::not_found, "no site " + site);
    if ((*s)->state == "revoked") return **s;
    if (auto st = mark_site_revoked(tx, site, reason, now); !st) return st.err();
    auto back = find_site(tx, site);
    if (!back) return back.err();
    return **back;
  });
  if (!rec) return rec.err();
  if (auto st = after_keys_changed(); !st) return st.err();
  return rec;
}

status site_registry::report(const std::string& site, const std::string& link_json, const std::string& datasets_json) {
  const auto now = now_();
  auto& last = reported_[site];
  const bool new_datasets = !datasets_json.empty() && datasets_json != last.datasets_json;
  if (!new_datasets && now - last.at < report_every) return ok_status();
  // Heartbeats are too small to measure bandwidth: keep the one the site's
  // trainer measured (report_bandwidth), from memory or, after a restart, the store.
  auto link = nlohmann::json::parse(link_json, nullptr, false);
  const bool keep_bandwidth = link.is_object() && !(link.value("bandwidth_bytes_per_s", 0.0) > 0);
  auto st = db_->with_transaction([&](store::transaction& tx) -> status {
    std::string merged = link_json;
    if (keep_bandwidth) {
      double bw = last.bandwidth;
      if (!(bw > 0)) {
        auto cur = find_site(tx, site);
        if (!cur) return cur.err();
        if (*cur) bw = bandwidth_of((*cur)->link_json);
      }
      if (bw > 0) merged = with_bandwidth(link, bw);
    }
    return save_site_report(tx, site, merged, new_datasets ? datasets_json : "", now);
  });
  if (!st) return st;
  last.at = now;
  if (new_datasets) last.datasets_json = datasets_json;
  return ok_status();
}

status site_registry::report_bandwidth(const std::string& site, double bytes_per_s) {
  if (!(bytes_per_s > 0) || !std::isfinite(bytes_per_s))
    return make_error(errc::invalid_argument, "site " + site + "'s bandwidth must be a positive number of bytes/s");
  const auto now = now_();
  if (auto it = reported_.find(site); it != reported_.end() && it->second.bandwidth > 0 &&
                                      now - it->second.bandwidth_at < report_every) {
    it->second.bandwidth = bytes_per_s;  // written with the next write
    return ok_status();
  }
  auto st = db_->with_transaction([&](store::transaction& tx) -> status {
    auto cur = find_site(tx, site);
    if (!cur) return cur.err();
    if (!*cur) return make_error(errc::not_found, "no site " + site);
    auto link = nlohmann::json::parse((*cur)->link_json, nullptr, false);
    if (!link.is_object()) link = {{"rtt_ms", 0.0}, {"state", "unknown"}};  // no heartbeat report yet
    return save_site_report(tx, site, with_bandwidth(link, bytes_per_s), "", now);
  });
  if (!st) return st;
  auto& last = reported_[site];  // a known site only
  last.bandwidth = bytes_per_s;
  last.bandwidth_at = now;
  return ok_status();
}

result<bool> site_registry::has_site(const std::string& name) {
  if (!names_) {
    auto all = list();
    if (!all) return all.err();
    names_.emplace();
    for (const auto& s : *all) names_->insert(s.name);
  }
  return names_->count(name) > 0;
}

result<std::vector<site_rec>> site_registry::list() {
  return db_->with_read_transaction([](store::transaction& tx) { return load_sites(tx); });
}

}  // namespace loom::scheduler
