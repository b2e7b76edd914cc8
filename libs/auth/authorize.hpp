// The one authorization decision every service makes per request: token
// verification, zone scope, then role against the policy table. Pure function
// of its inputs (time and epoch passed in); thread-safe.
#pragma once

#include "libs/auth/token.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace loom::auth {

struct auth_context {
  std::string_view key;         // the token key (raw bytes, see load_token_key)
  std::int64_t now_unix_s;
  std::uint64_t min_epoch;      // current revocation epoch
  std::string_view service_zone;
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
// authenticates the body), a token is present and verifies (else unauthenticated), the service zone is
// in the token's zones, and the role is at least the entry's min_role
// (else permission_denied).
decision authorize(std::string_view type, std::string_view token, const auth_context& ctx);

}  // namespace loom::auth
