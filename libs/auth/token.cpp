#include "libs/auth/token.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/status/unix_time.hpp"

#include <charconv>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <cstring>
#include <cerrno>
#include <unistd.h>
#include <sys/stat.h>

namespace loom::auth {
namespace {

constexpr std::string_view prefix = "lt1.";
// Far above any real token (a few hundred bytes); bounds the work an
// unauthenticated caller can make us do.
constexpr std::size_t max_token_chars = 16 * 1024;
constexpr std::size_t key_bytes = 32;

// Payload layout, all integers big-endian:
//   u32 len, principal | u8 role | u32 n, n * (u32 len, zone) |
//   i64 expires_unix_s | u64 epoch | i64 issued_unix_s | u32 len, tenant
// The tenant came later: a payload that ends after issued_unix_s is a token
// minted before tenants and belongs to "default".
void put_u64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>(v >> shift & 0xff);
}
void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>(v >> shift & 0xff);
}
void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

// Bounds-checked reader; every get fails (returns false) past the end.
class reader {
 public:
  explicit reader(std::string_view data) : data_(data) {}
  bool get_uint(int bytes, std::uint64_t& v) {
    if (data_.size() - pos_ < static_cast<std::size_t>(bytes)) return false;
    v = 0;
    for (int i = 0; i < bytes; ++i) v = v << 8 | static_cast<unsigned char>(data_[pos_++]);
    return true;
  }
  bool get_str(std::string& s) {
    std::uint64_t n = 0;
    if (!get_uint(4, n) || data_.size() - pos_ < n) return false;
    s.assign(data_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  bool at_end() const { return pos_ == data_.size(); }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
};

std::string encode_claims(const claims& c) {
  std::string out;
  put_str(out, c.principal);
  out += static_cast<char>(static_cast<int>(c.r));
  put_u32(out, static_cast<std::uint32_t>(c.zones.size()));
  for (const auto& z : c.zones) put_str(out, z);
  put_u64(out, static_cast<std::uint64_t>(c.expires_unix_s));
  put_u64(out, c.epoch);
  put_u64(out, static_cast<std::uint64_t>(c.issued_unix_s));
  put_str(out, tenant_of(c));
  return out;
}

error malformed(std::string_view why) {
  return make_error(errc::unauthenticated, "malformed token: " + std::string(why));
}

result<claims> decode_claims(std::string_view payload) {
  reader in(payload);
  claims c;
  std::uint64_t r = 0, n = 0, expires = 0, issued = 0;
  if (!in.get_str(c.principal) || !in.get_uint(1, r) || !in.get_uint(4, n))
    return malformed("payload is truncated");
  if (r < 1 || r > 3) return malformed("payload has an unknown role");
  c.r = static_cast<role>(r);
  if (n > payload.size()) return malformed("payload zone count is impossible");
  c.zones.resize(n);
  for (auto& z : c.zones)
    if (!in.get_str(z)) return malformed("payload is truncated");
  if (!in.get_uint(8, expires) || !in.get_uint(8, c.epoch) || !in.get_uint(8, issued))
    return malformed("payload is truncated");
  if (in.at_end()) c.tenant = default_tenant;  // minted before tenants
  else if (!in.get_str(c.tenant)) return malformed("payload is truncated");
  if (!in.at_end()) return malformed("payload has trailing bytes");
  c.expires_unix_s = static_cast<std::int64_t>(expires);
  c.issued_unix_s = static_cast<std::int64_t>(issued);
  return c;
}

// "2024-05-01T12:00:00Z (unix 1714564800)"; the number alone when it has no date.
std::string expiry_text(std::int64_t unix_s) {
  const std::string utc = utc_text(unix_s);
  return utc.empty() ? "unix " + std::to_string(unix_s) : utc + " (unix " + std::to_string(unix_s) + ")";
}

bool name_char(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
         ch == '_' || ch == '@' || ch == ':' || ch == '+' || ch == '-';
}

}  // namespace

std::string printable(std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : text) {
    if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
      out += static_cast<char>(ch);
    } else {
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

std::string_view tenant_of(const claims& c) { return c.tenant.empty() ? default_tenant : std::string_view(c.tenant); }

status validate_name(std::string_view what, std::string_view name) {
  auto bad = [&](std::string why) {
    return make_error(errc::invalid_argument, std::string(what) + " '" + printable(name.substr(0, max_name_chars)) +
                                                  (name.size() > max_name_chars ? "..." : "") + "' " + why +
                                                  " (allowed: 1.." + std::to_string(max_name_chars) +
                                                  " characters from A-Z a-z 0-9 . _ @ : + -)");
  };
  if (name.empty()) return make_error(errc::invalid_argument, std::string(what) + " is empty");
  if (name.size() > max_name_chars) return bad("is " + std::to_string(name.size()) + " characters long");
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(static_cast<unsigned char>(name[i])))
      return bad("has character '" + printable(name.substr(i, 1)) + "' at position " + std::to_string(i + 1));
  return ok_status();
}

std::string_view to_string(role r) {
  switch (r) {
    case role::viewer: return "viewer";
    case role::operator_: return "operator";
    case role::admin: return "admin";
  }
  return "unknown";
}

std::optional<role> role_from_string(std::string_view name) {
  for (role r : {role::viewer, role::operator_, role::admin})
    if (to_string(r) == name) return r;
  return std::nullopt;
}

result<std::string> issue_token(const claims& c, std::string_view key) {
  auto bad = [](std::string msg) { return make_error(errc::invalid_argument, std::move(msg)); };
  if (key.empty()) return bad("cannot issue a token: the token key is empty");
  if (auto s = validate_name("principal", c.principal); !s) return bad("cannot issue a token: " + s.err().message);
  if (!c.tenant.empty())
    if (auto s = validate_name("tenant", c.tenant); !s) return bad("cannot issue a token: " + s.err().message);
  if (to_string(c.r) == "unknown") return bad("cannot issue a token: unknown role");
  if (c.zones.empty()) return bad("cannot issue a token: no zones (use \"*\" for every zone)");
  for (const auto& z : c.zones) {
    if (z.empty()) return bad("cannot issue a token: a zone name is empty");
    if (z != "*")
      if (auto s = validate_name("zone", z); !s) return bad("cannot issue a token: " + s.err().message);
  }
  if (c.expires_unix_s <= c.issued_unix_s)
    return bad("cannot issue a token: expires_unix_s must be after issued_unix_s");
  std::string signed_part = std::string(prefix) + crypto::base64url_encode(encode_claims(c));
  auto mac = crypto::hmac_sha256(key, signed_part);
  return signed_part + "." + crypto::base64url_encode(crypto::as_view(mac));
}

result<claims> verify_token(std::string_view token, std::string_view key, verify_options opt) {
  if (key.empty()) return make_error(errc::unauthenticated, "no token key configured: every token is refused");
  if (token.size() > max_token_chars) return malformed("longer than any token we issue");
  if (!token.starts_with(prefix)) return malformed("missing lt1. prefix");
  auto dot = token.find('.', prefix.size());
  if (dot == std::string_view::npos || token.find('.', dot + 1) != std::string_view::npos)
    return malformed("expected lt1.<payload>.<signature>");
  std::string_view signed_part = token.substr(0, dot);
  auto sig = crypto::base64url_decode(token.substr(dot + 1));
  if (!sig.ok()) return malformed("signature is not base64url");
  if (sig->size() != key_bytes) return malformed("signature has the wrong length");
  auto mac = crypto::hmac_sha256(key, signed_part);
  if (!crypto::constant_time_equal(crypto::as_view(mac), *sig))
    return make_error(errc::unauthenticated, "forged or corrupted token: signature mismatch");
  auto payload = crypto::base64url_decode(signed_part.substr(prefix.size()));
  if (!payload.ok()) return malformed("payload is not base64url");
  auto c = decode_claims(*payload);
  if (!c.ok()) return c;
  if (c->principal.empty() || c->zones.empty()) return malformed("payload has no principal or no zones");
  if (auto s = validate_name("principal", c->principal); !s) return malformed(s.err().message);
  if (auto s = validate_name("tenant", c->tenant); !s) return malformed(s.err().message);
  if (opt.now_unix_s >= c->expires_unix_s)
    return make_error(errc::unauthenticated, "token expired at " + expiry_text(c->expires_unix_s));
  if (c->epoch < opt.min_epoch)
    return make_error(errc::unauthenticated, "token epoch " + std::to_string(c->epoch) +
                                                 " revoked (current epoch " + std::to_string(opt.min_epoch) + ")");
  return c;
}

bool zone_allowed(const claims& c, std::string_view zone) {
  for (const auto& z : c.zones)
    if (z == "*" || z == zone) return true;
  return false;
}

result<std::string> load_token_key(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(errc::not_found, "token key file " + path + " not found (create one with create_token_key)");
  if (!S_ISREG(st.st_mode)) return make_error(errc::invalid_argument, "token key file " + path + " is not a regular file");
  if ((st.st_mode & 0777 & ~0600u) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 0777));
    return make_error(errc::permission_denied, "token key file " + path + " has mode " + mode +
                                                   ", wider than 0600; fix with: chmod 600 " + path);
  }
  auto text = files::read_file(path);
  if (!text.ok()) return text.err();
  std::string_view hex = *text;
  if (hex.ends_with('\n')) hex.remove_suffix(1);
  if (hex.size() != 2 * key_bytes)
    return make_error(errc::invalid_argument, "token key file " + path + " must hold 64 hex characters (a 32-byte key), found " +
                                                  std::to_string(hex.size()) + " characters");
  auto key = crypto::from_hex(hex);
  if (!key.ok()) return make_error(errc::invalid_argument, "token key file " + path + ": " + key.err().message);
  return key;
}

status create_token_key(const std::string& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0)
    return make_error(errc::already_exists, "token key file " + path + " already exists; refusing to replace it");
  std::filesystem::path p(path);
  if (p.has_parent_path())
    if (auto s = files::make_dirs(p.parent_path().string(), 0700); !s.ok()) return s;
  // Written aside, then linked into place: link() fails when the path exists,
  // so two processes (trainers sharing a data dir) creating the key at once
  // end with one key that both load, never one replacing the other's.
  const std::string aside = path + ".new." + std::to_string(::getpid()) + "." + crypto::to_hex(crypto::random_bytes(4));
  if (auto s = files::write_atomic(aside, crypto::to_hex(crypto::random_bytes(key_bytes)) + "\n", 0600); !s.ok())
    return s;
  const int rc = ::link(aside.c_str(), path.c_str());
  const int err = errno;
  ::unlink(aside.c_str());
  if (rc != 0 && err == EEXIST)
    return make_error(errc::already_exists, "token key file " + path + " already exists; refusing to replace it");
  if (rc != 0) return make_error(errc::internal, "token key file " + path + ": link: " + std::strerror(err));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return files::fsync_dir(dir.empty() ? "." : dir.string());
}

result<std::uint64_t> read_epoch(const std::string& path) {
  auto text = files::read_file(path);
  if (!text.ok()) {
    if (text.code() == errc::not_found) return std::uint64_t{0};
    return text.err();
  }
  std::string_view s = *text;
  if (s.ends_with('\n')) s.remove_suffix(1);
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    return make_error(errc::corruption, "epoch file " + path + " does not hold a decimal number");
  return v;
}

status write_epoch(const std::string& path, std::uint64_t epoch) {
  return files::write_atomic(path, std::to_string(epoch) + "\n", 0644);
}

}  // namespace loom::auth
