// Bearer tokens: claims (who, role, zones, expiry, revocation epoch) in a
// canonical binary encoding, signed with HMAC-SHA256 under the deployment's
// token key. Also the two files an operator manages: the key and the epoch.
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
};

// "lt1." + base64url(payload) + "." + base64url(hmac_sha256(key, "lt1." + base64url(payload))).
// invalid_argument for an empty key or principal, no zones, an empty zone, or
// expires_unix_s not after issued_unix_s.
result<std::string> issue_token(const claims& c, std::string_view key);

struct verify_options {
  std::int64_t now_unix_s;
  std::uint64_t min_epoch = 0;  // tokens with epoch < min_epoch are revoked
};

// The claims of a genuine, unexpired, unrevoked token; otherwise
// errc::unauthenticated saying which check failed. The MAC is compared in
// constant time and checked before the payload is parsed.
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
