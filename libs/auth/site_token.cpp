#include "libs/auth/site_token.hpp"

#include "libs/auth/token.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"

namespace loom::auth {
namespace {
constexpr std::string_view prefix = "lse1.";
constexpr std::size_t secret_bytes = 16;  // 128 bits: not guessable within any token's lifetime
constexpr std::size_t key_bytes = 32;

bool lower_hex(std::string_view s) {
  for (char ch : s)
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  return true;
}
}  // namespace

std::string make_enrol_token(std::string_view cloud_key_raw) {
  return std::string(prefix) + crypto::to_hex(crypto::random_bytes(secret_bytes)) + "." +
         crypto::to_hex(cloud_key_raw);
}

result<enrol_token> parse_enrol_token(std::string_view text) {
  if (!text.starts_with(prefix))
    return make_error(errc::invalid_argument, "not a site enrolment token (they start with lse1.; `loom site token` "
                                              "prints one)");
  text.remove_prefix(prefix.size());
  const auto dot = text.find('.');
  if (dot != secret_bytes * 2 || text.size() != dot + 1 + key_bytes * 2)
    return make_error(errc::invalid_argument, "a site enrolment token is lse1.<32 hex>.<64 hex>: this one has the "
                                              "wrong length (copied in part?)");
  const auto secret = text.substr(0, dot), key = text.substr(dot + 1);
  if (!lower_hex(secret) || !lower_hex(key))
    return make_error(errc::invalid_argument, "a site enrolment token holds lower-case hex only");
  auto raw = crypto::from_hex(key);
  if (!raw) return raw.err();
  return enrol_token{std::string(secret), std::move(*raw)};
}

std::string enrol_token_hash(const enrol_token& t) { return crypto::sha256_hex(t.secret_hex); }

status validate_site_name(std::string_view name) {
  if (name.empty()) return make_error(errc::invalid_argument, "site name is empty");
  if (name.size() > max_site_chars)
    return make_error(errc::invalid_argument, "site name is " + std::to_string(name.size()) + " characters (at most " +
                                                  std::to_string(max_site_chars) + ")");
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char ch = name[i];
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || (ch == '-' && i > 0);
    if (!ok)
      return make_error(errc::invalid_argument, "site name " + printable(name) + ": character " +
                                                    printable(name.substr(i, 1)) + " at " + std::to_string(i + 1) +
                                                    " (use a-z, 0-9 and -, not first)");
  }
  return ok_status();
}

}  // namespace loom::auth
