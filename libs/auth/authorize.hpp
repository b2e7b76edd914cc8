// The one authorization decision every service makes per request: token
// verification, a site token's bounds (its own keys, its business, its site
// still admitted), zone scope, then role against the policy table. Pure
// function of its inputs (time, epoch and admission passed in); thread-safe.
#pragma once

#include "libs/auth/token.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace loom::auth {

struct auth_context {
  std::string_view key;         // the token key (raw bytes, see load_token_key)
  std::int64_t now_unix_s;
  std::uint64_t min_epoch;      // current revocation epoch
  std::string_view service_zone;
  // The connection's CURVE principal (call_context::peer; identity.hpp).
  std::string_view peer{};
  // Whether site S still has an admitted key (runtime::admission): a site
  // token whose site has none is dead. Null: not known here (the token is
  // still bound to its site's keys).
  std::function<bool(std::string_view site)> site_admitted{};
};

struct decision {
  bool allowed = false;
  errc code = errc::permission_denied;  // errc::ok when allowed
  std::string reason;                   // empty when allowed
  std::optional<claims> who;            // set whenever the token verified, also on denials (for audit)
  bool mutating = false;                // from the policy entry; false for unknown types
};

// Checks, in order: a policy entry exists for `type` (else permission_denied),
// then, unless the type is token_free() (allowed here, who unset: its logic
// authenticates the body), a token is present and verifies (else
// unauthenticated); a site's token (principal "site:<S>") must come from a
// site S still admitted, over one of S's own keys ("site:<S>:*"), for a type
// marked site business; the service zone is in the token's zones, and the
// role is at least the entry's min_role (each else permission_denied).
decision authorize(std::string_view type, std::string_view token, const auth_context& ctx);

}  // namespace loom::auth
