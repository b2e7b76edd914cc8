#include "libs/auth/identity.hpp"

#include "libs/auth/token.hpp"

namespace loom::auth {
namespace {
constexpr std::string_view site_prefix = "site:";
constexpr std::string_view service_prefix = "svc:";
}

peer_id parse_peer(std::string_view principal) {
  peer_id p;
  if (principal.empty()) return p;
  if (principal == "unenrolled") {
    p.kind = peer_kind::unenrolled;
    return p;
  }
  if (principal == "client") {
    p.kind = peer_kind::client;
    return p;
  }
  if (principal.starts_with(site_prefix)) {
    auto rest = principal.substr(site_prefix.size());
    auto colon = rest.find(':');
    if (colon != std::string_view::npos && colon > 0 && colon + 1 < rest.size() &&
        rest.find(':', colon + 1) == std::string_view::npos) {
      p.kind = peer_kind::site_service;
      p.site = std::string(rest.substr(0, colon));
      p.service = std::string(rest.substr(colon + 1));
      return p;
    }
  }
  p.kind = peer_kind::own_service;
  p.service = std::string(principal);
  return p;
}

bool is_trainer_key(const peer_id& p) {
  return (p.kind == peer_kind::own_service || p.kind == peer_kind::site_service) && p.service == "trainer";
}

std::optional<std::string> site_of_token(std::string_view token_principal) {
  if (!token_principal.starts_with(site_prefix)) return std::nullopt;
  auto site = token_principal.substr(site_prefix.size());
  if (site.empty() || site.find(':') != std::string_view::npos) return std::nullopt;
  return std::string(site);
}

std::string site_token_principal(std::string_view site) { return std::string(site_prefix) + std::string(site); }

bool is_service_token(std::string_view token_principal) { return token_principal.starts_with(service_prefix); }

issuable_result issuable_principal(std::string_view principal) {
  if (principal.starts_with(site_prefix))
    return {false, "principal " + printable(principal) +
                       " is reserved: a site's token is minted only by the cloud scheduler when the site enrols "
                       "(`loom site enrol`), bound to the site's own keys and dead once it is revoked"};
  if (principal.starts_with(service_prefix))
    return {false, "principal " + printable(principal) +
                       " is reserved: svc:* names the services' own tokens, which they mint themselves"};
  if (principal == "unenrolled")
    return {false, "principal unenrolled is reserved: it names an unknown key on the enrolment socket"};
  return {};
}

std::string record_tenant(std::string_view token_principal, std::string_view token_tenant) {
  if (token_principal.starts_with(site_prefix) || is_service_token(token_principal)) return "";
  return std::string(token_tenant);
}

}  // namespace loom::auth
