#include "libs/auth/authorize.hpp"

#include "libs/auth/identity.hpp"
#include "libs/auth/policy.hpp"

namespace loom::auth {

decision authorize(std::string_view type, std::string_view token, const auth_context& ctx) {
  decision d;
  auto deny = [&d](errc code, std::string reason) {
    d.code = code;
    d.reason = std::move(reason);
    return std::move(d);
  };
  const policy_entry* p = find_policy(type);
  if (!p) return deny(errc::permission_denied, "no policy for request type " + printable(type) + ": denied");
  d.mutating = p->mutating;
  if (token_free(type)) {  // the logic checks the credential in the body; a bearer token is not looked at
    d.allowed = true;
    d.code = errc::ok;
    return d;
  }
  if (token.empty()) return deny(errc::unauthenticated, "no token: " + std::string(type) + " needs a bearer token");
  auto c = verify_token(token, ctx.key, {ctx.now_unix_s, ctx.min_epoch});
  if (!c.ok()) return deny(errc::unauthenticated, c.err().message);
  d.who = std::move(c).value();
  if (auto site = site_of_token(d.who->principal)) {
    // A site's token acts only for its site: dead with its keys, bound to them, its business only.
    if (ctx.site_admitted && !ctx.site_admitted(*site))
      return deny(errc::permission_denied, "the token of site " + *site + " is dead: the site has no admitted " +
                                               "CURVE key (revoked)");
    const peer_id peer = parse_peer(ctx.peer);
    if (peer.kind != peer_kind::site_service || peer.site != *site)
      return deny(errc::permission_denied, "a site token acts only for its site: the token of site " + *site +
                                               " is accepted only over that site's own CURVE keys, not " +
                                               (ctx.peer.empty() ? std::string("a connection without one")
                                                                 : printable(ctx.peer)));
    if (!p->site_business)
      return deny(errc::permission_denied,
                  "a site token acts only for its site: " + std::string(type) + " is not site business");
  }
  if (!zone_allowed(*d.who, ctx.service_zone))
    return deny(errc::permission_denied,
                "principal " + d.who->principal + " may not act in zone " + std::string(ctx.service_zone));
  if (static_cast<int>(d.who->r) < static_cast<int>(p->min_role))
    return deny(errc::permission_denied, "role " + std::string(to_string(d.who->r)) + " may not call " +
                                             std::string(type) + " (needs " + std::string(to_string(p->min_role)) + ")");
  d.allowed = true;
  d.code = errc::ok;
  return d;
}

}  // namespace loom::auth
