// The sites registry's rows in the state store (migration v5): sites, their
// services' CURVE public keys, and one-time enrolment tokens (only the
// SHA-256 of each secret). Each call runs inside the caller's transaction.
// Used by site_registry on the scheduler actor's thread.
#pragma once

#include "libs/status/status.hpp"
#include "services/scheduler/roster.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::store {
class transaction;
struct migration;
}  // namespace loom::store

namespace loom::scheduler {

struct site_rec {
  std::string name;
  std::string state;  // pending (a token issued, never enrolled), enrolled, revoked
  std::map<std::string, std::string> keys;  // service -> Z85 public key
  time_point created{}, enrolled{}, revoked{}, last_contact{};
  std::string revoke_reason;
  // What the site reported (v9), as JSON text; "" = never reported.
  // link: {"rtt_ms", "bandwidth_bytes_per_s", "state"}; datasets: [{"name", "bytes"}].
  std::string link_json, datasets_json;
};

struct site_token_rec {
  std::string site;
  time_point issued{}, expires{};
  bool used = false;
};

// v5: sites, site_keys (a key belongs to one site: PRIMARY KEY), site_tokens.
const store::migration& sites_migration();

// v9: sites.link_json and sites.datasets_json, what a site's nodes report with their heartbeats.
const store::migration& site_reports_migration();

result<std::vector<site_rec>> load_sites(store::transaction& tx);  // by name, keys included
result<std::optional<site_rec>> find_site(store::transaction& tx, const std::string& name);
// A `pending` row unless the site exists.
status ensure_site(store::transaction& tx, const std::string& name, time_point now);
status insert_site_token(store::transaction& tx, const std::string& token_sha256, const std::string& site,
                         const std::string& issued_by, time_point issued, time_point expires);
result<std::optional<site_token_rec>> find_site_token(store::transaction& tx, const std::string& token_sha256);
// Marks the token used; false when it already was (a concurrent enrolment won).
result<bool> use_site_token(store::transaction& tx, const std::string& token_sha256, time_point now);
// The site's keys become `keys`. already_exists when one belongs to another site.
status replace_site_keys(store::transaction& tx, const std::string& site,
                         const std::map<std::string, std::string>& keys);
status mark_site_enrolled(store::transaction& tx, const std::string& site, time_point now);
// The site's latest report; an empty datasets_json keeps the stored one.
status save_site_report(store::transaction& tx, const std::string& site, const std::string& link_json,
                        const std::string& datasets_json, time_point now);
status mark_site_revoked(store::transaction& tx, const std::string& site, const std::string& reason, time_point now);

}  // namespace loom::scheduler
