// admission: which CURVE keys a service process lets in, kept current while
// it runs. The deployment's own keys (<data>/keys/curve/*.pub, principal =
// file stem) and, on a cloud instance, the enrolled edge sites' keys
// (<data>/keys/sites/<site>.<service>.pub, principal "site:<site>:<service>"),
// which the scheduler writes from its sites registry and removes on
// revocation. service_main makes one per process; the gateway refreshes it
// about once a second and asks still_admitted() for every request, so a
// revoked site is refused on connections made before the revocation too, and
// so is its bearer token (site_admitted(): a site token whose site has no
// admitted key is dead, libs/auth/authorize.hpp).
// Thread-safe: refresh() may run on the gateway thread and the scheduler's
// actor thread at once.
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace loom::runtime {

// The ZAP principal of an enrolled site's service, and the prefix they share.
inline constexpr std::string_view site_principal_prefix = "site:";
std::string site_principal(std::string_view site, std::string_view service);

// The deployment's keys plus the enrolled sites' keys. A site key equal to one
// of the deployment's own is skipped (the own principal wins). Errors: as
// wire::load_allow_list for keys/curve (required); a bad file in keys/sites
// is invalid_argument naming it. A missing keys/sites is no sites.
result<wire::allow_list> admitted_keys(const layout::paths& p);

class admission {
 public:
  // REQUIRES: `zap` outlives this object. Reads the keys once (refresh()).
  admission(layout::paths p, wire::zap_handler& zap);

  // Re-reads the keys and hands them to the ZAP handler. On an error the
  // previous list stays in force and the error is returned.
  status refresh();
  // refresh() when `period` has passed since the last one (the gateway's loop).
  void refresh_every(std::chrono::milliseconds period, std::chrono::steady_clock::time_point now);
  // Whether a connection admitted as `peer` may still send: false for a site
  // principal whose key is no longer in the list (revoked since the
  // handshake); true for every other principal.
  bool still_admitted(std::string_view peer) const;
  // Whether some key of site `site` ("site:<site>:*") is admitted now.
  bool site_admitted(std::string_view site) const;

 private:
  layout::paths paths_;
  wire::zap_handler& zap_;
  std::mutex mu_;  // one refresh at a time
  std::chrono::steady_clock::time_point last_{};
  std::string last_error_;  // logged once per distinct error
  mutable std::mutex sites_mu_;  // guards sites_ (read by the gateway, written by refresh)
  std::set<std::string, std::less<>> sites_;  // sites with an admitted key, as of the last refresh
};

}  // namespace loom::runtime
