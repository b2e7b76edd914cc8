#include "libs/runtime/admission.hpp"

#include <cstdio>

namespace loom::runtime {

std::string site_principal(std::string_view site, std::string_view service) {
  return std::string(site_principal_prefix) + std::string(site) + ":" + std::string(service);
}

result<wire::allow_list> admitted_keys(const layout::paths& p) {
  auto own = wire::load_allow_list(p.curve_dir());
  if (!own) return own.err();
  auto sites = wire::load_allow_list(p.sites_dir());
  if (!sites) {
    if (sites.code() == errc::not_found) return own;
    return make_error(sites.code(), "enrolled site keys: " + sites.err().message);
  }
  for (const auto& [key, stem] : *sites) {
    // <site>.<service>: site names have no dot (sites registry), service names neither.
    const auto dot = stem.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == stem.size())
      return make_error(errc::invalid_argument,
                        p.sites_dir() + "/" + stem + ".pub: not named <site>.<service>.pub");
    own->emplace(key, site_principal(stem.substr(0, dot), stem.substr(dot + 1)));
  }
  return own;
}

admission::admission(layout::paths p, wire::zap_handler& zap) : paths_(std::move(p)), zap_(zap) {
  (void)refresh();  // an error is logged; the ZAP handler keeps the list it was made with
}

status admission::refresh() {
  std::lock_guard lock(mu_);
  last_ = std::chrono::steady_clock::now();
  auto keys = admitted_keys(paths_);
  if (!keys) {
    if (keys.err().message != last_error_)
      std::fprintf(stderr, "admission: keeping the previous allow-list: %s\n", keys.err().to_string().c_str());
    last_error_ = keys.err().message;
    return keys.err();
  }
  last_error_.clear();
  std::set<std::string, std::less<>> sites;
  for (const auto& [key, who] : *keys) {
    if (!who.starts_with(site_principal_prefix)) continue;
    const auto rest = std::string_view(who).substr(site_principal_prefix.size());
    sites.emplace(rest.substr(0, rest.find(':')));
  }
  {
    std::lock_guard sl(sites_mu_);
    sites_ = std::move(sites);
  }
  zap_.set_allow_list(std::move(*keys));
  return ok_status();
}

void admission::refresh_every(std::chrono::milliseconds period, std::chrono::steady_clock::time_point now) {
  {
    std::lock_guard lock(mu_);
    if (now - last_ < period) return;
  }
  (void)refresh();  // an error is logged and the old list kept
}

bool admission::site_admitted(std::string_view site) const {
  std::lock_guard lock(sites_mu_);
  return sites_.find(site) != sites_.end();
}

bool admission::still_admitted(std::string_view peer) const {
  if (!peer.starts_with(site_principal_prefix)) return true;
  return zap_.admits_principal(peer);
}

}  // namespace loom::runtime
