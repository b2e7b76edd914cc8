#include "libs/auth/authorize.hpp"

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
