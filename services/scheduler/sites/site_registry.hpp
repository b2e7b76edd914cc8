// site_registry: the cloud's edge sites (issue 15 item 1). An admin issues a
// one-time enrolment token for a site name; the site enrols with it,
// exchanging CURVE public keys (its services' for the cloud's); an admin may
// revoke it. The store (site_store.hpp) is the truth; the enrolled sites'
// keys are also written to <data>/keys/sites/<site>.<service>.pub, which every
// cloud service's admission (libs/runtime/admission.hpp) re-reads, so an
// enrolled site's services are let in and a revoked site's are refused.
//
//   issue_token ─▶ pending ──enrol(token)──▶ enrolled ──revoke──▶ revoked (final)
//                               ▲   │ enrol again (a new token): new keys
//                               └───┘
//
// Owned by the scheduler logic; used on the service actor's thread only.
// Time is injected. Refusals of an enrolment are permission_denied with the
// reason (unknown, used or expired token, a token of another site or another
// cloud, a revoked site); malformed keys are invalid_argument.
#pragma once

#include "libs/runtime/site_keys.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"
#include "services/scheduler/sites/site_store.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace loom::store {
class database;
}

namespace loom::scheduler {

// What an enrolled site is told about the cloud.
struct cloud_service {
  std::string name, endpoint, public_key, pull;
};
struct cloud_info {
  std::string zone;                // the cloud's own zone: no site may take its name
  std::string scheduler_key;       // Z85: named in every token
  std::string scheduler_endpoint;  // where sites enrol
  std::vector<cloud_service> services;
  std::string token_key{};         // the cloud's token key: signs the sites' bearer tokens ("" = none)
  std::string epoch_file{};        // keys/epoch: the tokens' revocation epoch
};

// The keys of the enrolled sites among `sites` (what keys/sites holds and
// SiteKeysReply carries).
std::vector<runtime::site_key> enrolled_keys(const std::vector<site_rec>& sites);

class site_registry {
 public:
  using clock_fn = std::function<time_point()>;
  // A token lives an hour unless asked otherwise, a week at most: long enough
  // to carry to a site, short enough that a leaked unused one soon expires.
  static constexpr std::chrono::milliseconds default_ttl = std::chrono::hours(1);
  static constexpr std::chrono::milliseconds max_ttl = std::chrono::hours(24 * 7);

  // keys_dir: <data>/keys/sites. own_keys: the deployment's own (keys/curve),
  // which no site may enrol. keys_changed: called after keys_dir changed
  // (admission::refresh). REQUIRES: db non-null.
  site_registry(store::database* db, clock_fn now, cloud_info cloud, std::string keys_dir,
                wire::allow_list own_keys, std::function<void()> keys_changed);

  // Rewrites keys_dir from the store (at start: a crash between a commit and
  // the files leaves them behind the store, never ahead for long).
  status sync_key_files();

  struct issued {
    std::string token;
    time_point expires{};
  };
  // invalid_argument for a bad name, the cloud's zone or a ttl out of range;
  // conflict for a revoked site.
  result<issued> issue_token(const std::string& site, std::chrono::milliseconds ttl, const std::string& issued_by);
  result<site_rec> enrol(const std::string& site, const std::string& token,
                         const std::map<std::string, std::string>& keys);
  // not_found for an unknown site; revoking a revoked site changes nothing.
  result<site_rec> revoke(const std::string& site, const std::string& reason);
  result<std::vector<site_rec>> list();
  // Whether `name` is a site of the registry (any state: a revoked site's
  // zone stays its own). Answered from memory after the first call.
  result<bool> has_site(const std::string& name);

  // What site `site`'s nodes reported (site_store::save_site_report). Written
  // at most every report_every per site unless the datasets changed.
  static constexpr std::chrono::seconds report_every{10};
  // A heartbeat's link without a bandwidth keeps the site's measured one.
  status report(const std::string& site, const std::string& link_json, const std::string& datasets_json);
  // Site `site`'s uplink as its own trainer measured it (SiteProgress
  // up_bytes_per_s): stored in its link record as "bandwidth_bytes_per_s",
  // at most every report_every. invalid_argument unless positive and finite;
  // not_found for an unknown site.
  status report_bandwidth(const std::string& site, double bytes_per_s);

  const cloud_info& cloud() const { return cloud_; }
  // What an enrolling site is told about the cloud's services: the provider's
  // answer when one is set (the scheduler re-reads endpoints.json: on a cloud
  // split over hosts the aggregator's host joins later), else cloud().services.
  void set_cloud_services(std::function<std::vector<cloud_service>()> f) { services_of_ = std::move(f); }
  std::vector<cloud_service> cloud_services() const { return services_of_ ? services_of_() : cloud_.services; }

 private:
  status check_keys(const std::map<std::string, std::string>& keys) const;
  status after_keys_changed();

  store::database* db_;
  clock_fn now_;
  cloud_info cloud_;
  std::function<std::vector<cloud_service>()> services_of_;
  std::string keys_dir_;
  wire::allow_list own_keys_;
  std::function<void()> keys_changed_;
  std::optional<std::set<std::string>> names_;  // every site's name, once loaded
  struct last_report {
    time_point at{};
    std::string datasets_json;
    double bandwidth = 0;  // the last report_bandwidth; 0 = none since this process started
    time_point bandwidth_at{};
  };
  std::map<std::string, last_report> reported_;
};

}  // namespace loom::scheduler
