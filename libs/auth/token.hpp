// Bearer tokens: claims (who, role, zones, expiry, revocation epoch, tenant)
// in a canonical binary encoding, signed with HMAC-SHA256 under the
// deployment's token key. Also the two files an operator manages: the key and the epoch.
// Stateless functions; thread-safe. No message ever contains a token or a key.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::auth {

// Ordered: a higher role may do everything a lower one may.
enum class role { viewer = 1, operator_ = 2, admin = 3 };

std::string_view to_string(role r);  // "viewer", "operator", "admin"
std::optional<role> role_from_string(std::string_view name);

struct claims {
  std::string principal;
  role r = role::viewer;
  std::vector<std::string> zones;  // "*" = every zone
  std::int64_t expires_unix_s = 0;
  std::uint64_t epoch = 0;  // revocation generation; see verify_options::min_epoch
  std::int64_t issued_unix_s = 0;
  // The tenant the holder's jobs belong to; "" means default_tenant. Signed
  // with the rest. Tokens issued before tenants existed verify as "default".
  // Last and initialised, so claims{...} lists without it stay valid.
  std::string tenant{};
};

inline constexpr std::string_view default_tenant = "default";
// c.tenant, or default_tenant when it is empty.
std::string_view tenant_of(const claims& c);

// Principal and tenant names: 1..128 characters from [A-Za-z0-9._@:+-] (no
// spaces, quotes, slashes or control characters: they are printed in audit
// listings and used as keys). ok, or invalid_argument naming `what`
// ("principal", "tenant"), the first bad character and its position (from 1).
inline constexpr std::size_t max_name_chars = 128;
status validate_name(std::string_view what, std::string_view name);
// `text` with every byte outside printable ASCII, and the backslash, written
// as \xHH: for quoting untrusted input (names, request types) in messages
// and audit reasons without letting it start a line of its own.
std::string printable(std::string_view text);

// "lt1." + base64url(payload) + "." + base64url(hmac_sha256(key, "lt1." + base64url(payload))).
// invalid_argument for an empty key, a principal, tenant or zone that fails
// validate_name (an empty tenant is "default"; a zone may be "*"), no zones,
// or expires_unix_s not after issued_unix_s.
result<std::string> issue_token(const claims& c, std::string_view key);

struct verify_options {
  std::int64_t now_unix_s;
  std::uint64_t min_epoch = 0;  // tokens with epoch < min_epoch are revoked
};

// The claims of a genuine, unexpired, unrevoked token; otherwise
// errc::unauthenticated saying which check failed. The MAC is compared in
// constant time and checked before the payload is parsed. The claims' tenant
// is never empty ("default" for tokens issued before tenants); a token whose
// principal or tenant fails validate_name (minted before names were checked)
// is refused.
result<claims> verify_token(std::string_view token, std::string_view key, verify_options opt);

// True when the claims name `zone` or "*".
bool zone_allowed(const claims& c, std::string_view zone);

// The key file holds 32 random bytes as 64 hex characters (+ optional newline)
// and must not be readable by group/others (mode 0600 or narrower).
// Returns the 32 raw key bytes.
result<std::string> load_token_key(const std::string& path);
// Writes a fresh random key with mode 0600 (parent dirs made 0700).
// already_exists if `path` exists: a key is never silently replaced.
status create_token_key(const std::string& path);

// The current revocation epoch, a decimal number; a missing file is epoch 0.
result<std::uint64_t> read_epoch(const std::string& path);
status write_epoch(const std::string& path, std::uint64_t epoch);  // atomic

}  // namespace loom::auth
