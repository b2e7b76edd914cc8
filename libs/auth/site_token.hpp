// Edge-site enrolment tokens and site names (issue 15 item 1). A cloud admin
// issues a one-time token for one site name (`loom site token`); the site
// presents it once (`loom site enrol`, later `loom up --site`). The token is
//   lse1.<32 hex: 16 random bytes, the secret>.<64 hex: the cloud scheduler's CURVE public key>
// so the site learns from the token which key its first connection must
// trust (the cloud never has to be trusted on first use). Only the SHA-256 of
// the secret is stored; expiry, the site name and the single use are the
// registry's (services/scheduler/sites). Stateless functions; thread-safe.
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <string_view>

namespace loom::auth {

struct enrol_token {
  std::string secret_hex;      // 32 lower-case hex characters
  std::string cloud_key_raw;   // 32 bytes: the scheduler's CURVE public key
};

// A fresh token naming the cloud scheduler's key (32 raw bytes).
// REQUIRES: cloud_key_raw.size() == 32.
std::string make_enrol_token(std::string_view cloud_key_raw);
// invalid_argument saying what is wrong (prefix, lengths, hex) otherwise. The
// message never quotes the token.
result<enrol_token> parse_enrol_token(std::string_view text);
// What the registry stores and looks the token up by: sha256_hex(secret_hex).
std::string enrol_token_hash(const enrol_token& t);

// A site name is also its zone and part of file names: 1..63 characters from
// [a-z0-9-], starting with a letter or digit. invalid_argument naming the
// first bad character and its position (from 1) otherwise.
inline constexpr std::size_t max_site_chars = 63;
status validate_site_name(std::string_view name);

}  // namespace loom::auth
