// Fuzzes bearer-token verification (libs/auth/token.hpp, verify_token) and
// site enrolment tokens (libs/auth/site_token.hpp, parse_enrol_token): every
// request carries a token any peer can write, and `loom site enrol` takes the
// enrolment token a human pastes. verify_token checks the MAC before it
// decodes the claims, so random bytes alone never reach the claims decoder:
// with a first byte of 1 the rest of the input is the claims payload, which
// the target signs with its own test key, as a key holder would.
//   byte 0 == 0: the rest is a raw token string
//   byte 0 == 1: the rest is a claims payload, signed here then verified
//   otherwise:   the rest is an enrolment token / site name
// Claims that verify and can be re-issued must verify again unchanged.
#include "libs/auth/site_token.hpp"
#include "libs/auth/token.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"

#include <cstdlib>
#include <string>

using namespace loom;
using namespace loom::auth;

namespace {
const std::string key(32, 'k');  // any 32 bytes: the target is its own issuer
constexpr verify_options at{.now_unix_s = 1'700'000'000, .min_epoch = 0};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] > 1) {
    if (auto t = parse_enrol_token(rest); t.ok() && (t->secret_hex.size() != 32 || t->cloud_key_raw.size() != 32))
      std::abort();
    (void)validate_site_name(rest);
    (void)validate_name("principal", rest);
    (void)printable(rest);
    return 0;
  }
  std::string token(rest);
  if (data[0] == 1) {
    std::string signed_part = "lt1." + crypto::base64url_encode(rest);
    token = signed_part + "." + crypto::base64url_encode(crypto::as_view(crypto::hmac_sha256(key, signed_part)));
  }
  auto c = verify_token(token, key, at);
  if (!c.ok()) return 0;
  if (c->tenant.empty() || c->zones.empty()) std::abort();
  auto again_token = issue_token(*c, key);
  if (!again_token.ok()) return 0;
  auto again = verify_token(*again_token, key, at);
  if (!again.ok() || again->principal != c->principal || again->r != c->r || again->zones != c->zones ||
      again->expires_unix_s != c->expires_unix_s || again->epoch != c->epoch || again->tenant != c->tenant)
    std::abort();
  return 0;
}
