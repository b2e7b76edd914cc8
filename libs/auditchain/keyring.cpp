#include "libs/auditchain/keyring.hpp"

#include "libs/files/secret_files.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/files/files.hpp"
#include "libs/status/unix_time.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace loom::auditchain {
namespace {

std::vector<std::string_view> fields(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  std::vector<std::string_view> f;
  while (!line.empty()) {
    auto sp = line.find(' ');
    f.push_back(line.substr(0, sp));
    line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
  }
  return f;
}

template <class T>
bool parse_int(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

// The DEK's wrapping binds it to its day and KEK version: a key file renamed
// to another day does not unwrap.
std::string wrap_context(std::uint32_t day, std::uint32_t kek_version) {
  std::string s = "loom.auditchain.dek.v1";
  for (std::uint32_t v : {day, kek_version})
    for (int i = 0; i < 4; ++i) s += static_cast<char>(v >> (24 - 8 * i));
  return s;
}

std::string_view view(const std::array<std::uint8_t, key_size>& k) {
  return {reinterpret_cast<const char*>(k.data()), k.size()};
}

void wipe(std::string& s) { OPENSSL_cleanse(s.data(), s.size()); }

}  // namespace

std::uint32_t day_of(sys_time t) {
  auto d = std::chrono::floor<std::chrono::days>(t);
  auto n = d.time_since_epoch().count();
  return n < 0 ? 0 : static_cast<std::uint32_t>(n);
}

std::string day_name(std::uint32_t day) {
  std::chrono::year_month_day ymd{std::chrono::sys_days{std::chrono::days{day}}};
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                static_cast<unsigned>(ymd.day()));
  return buf;
}

std::string keyring::kek_path(std::uint32_t v) const {
  char b[32];
  std::snprintf(b, sizeof b, "/kek-%06u.key", v);
  return dir_ + b;
}
std::string keyring::dek_path(std::uint32_t day) const { return dir_ + "/dek-" + std::to_string(day) + ".key"; }
std::string keyring::tombstone_path(std::uint32_t day) const {
  return dir_ + "/dek-" + std::to_string(day) + ".destroyed";
}

error keyring::destroyed_error(std::uint32_t day) const {
  std::string when;
  if (auto t = files::read_file(tombstone_path(day)); t.ok()) {
    auto f = fields(*t);
    std::int64_t ns = 0;
    if (f.size() == 2 && parse_int(f[1], ns)) when = " on " + day_name(day_of(sys_time(std::chrono::nanoseconds(ns))));
  }
  return make_error(errc::not_found, "key destroyed: the data key of " + day_name(day) + " (day " +
                                         std::to_string(day) + ") was crypto-shredded by the retention purge" + when +
                                         "; its payloads are unrecoverable");
}

result<std::unique_ptr<keyring>> keyring::open(const std::string& dir, keyring_options opt, sys_time now) {
  if (opt.retention < min_retention)
    return make_error(errc::invalid_argument, "audit key retention of " + std::to_string(opt.retention.count()) +
                                                  " days is below the minimum of 180 days");
  if (opt.kek_rotation.count() <= 0) return make_error(errc::invalid_argument, "KEK rotation period must be positive");
  if (opt.create) {
    if (auto s = files::secret::make_private_dir(dir); !s) return s.err();
  } else if (!std::filesystem::is_directory(dir)) {
    return make_error(errc::not_found, "no audit keys directory " + dir);
  }
  std::unique_ptr<keyring> k(new keyring(dir, std::move(opt)));
  std::lock_guard lock(k->mu_);
  if (auto s = k->load_keks(); !s) return s.err();
  if (k->keks_.empty() && k->opt_.create) {
    auto v = k->rotate_locked(now, false);
    if (!v) return v.err();
  }
  return k;
}

keyring::~keyring() {
  for (auto& [v, k] : keks_) OPENSSL_cleanse(k.key.data(), k.key.size());
  for (auto& [d, k] : deks_) OPENSSL_cleanse(k.key.data(), k.key.size());
}

std::vector<std::pair<std::uint32_t, std::int64_t>> keyring::kek_ages() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::uint32_t, std::int64_t>> out;
  for (const auto& [v, k] : keks_) out.emplace_back(v, k.created_ns);
  return out;
}

status keyring::load_keks() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = e.path().filename().string();
    std::uint32_t v = 0;
    if (name.size() != 14 || name.rfind("kek-", 0) != 0 || name.substr(10) != ".key" ||
        !parse_int(std::string_view(name).substr(4, 6), v))
      continue;
    if (keks_.count(v)) continue;
    auto text = files::secret::read_private(e.path().string());
    if (!text) return text.err();
    auto f = fields(*text);
    std::int64_t created = 0;
    std::uint32_t fv = 0;
    auto key = f.size() == 5 ? crypto::from_hex(f[4]) : result<std::string>(make_error(errc::corruption, ""));
    bool good = f.size() == 5 && f[0] == "loom-audit-kek" && f[1] == "v1" && parse_int(f[2], fv) && fv == v &&
                parse_int(f[3], created) && key.ok() && key->size() == key_size;
    wipe(*text);
    if (!good) {
      if (key.ok()) wipe(*key);
      return make_error(errc::corruption, e.path().string() + " is not a KEK file of version " + std::to_string(v));
    }
    kek& slot = keks_[v];
    slot.created_ns = created;
    std::memcpy(slot.key.data(), key->data(), key_size);
    wipe(*key);
  }
  if (ec) return make_error(errc::unavailable, "cannot list " + dir_ + ": " + ec.message());
  return ok_status();
}

result<std::uint32_t> keyring::rotate_locked(sys_time now, bool scheduled) {
  // Another process (`loom keys rotate`) may have made versions we do not
  // know: rescan, then claim the next number exclusively.
  for (int attempt = 0; attempt < 16; ++attempt) {
    if (auto s = load_keks(); !s) return s.err();
    std::uint32_t v = keks_.empty() ? 1 : keks_.rbegin()->first + 1;
    kek k;
    if (RAND_bytes(k.key.data(), static_cast<int>(k.key.size())) != 1)
      return make_error(errc::internal, "RAND_bytes failed");
    k.created_ns = unix_ns(now);
    std::string text = "loom-audit-kek v1 " + std::to_string(v) + " " + std::to_string(k.created_ns) + " " +
                       crypto::to_hex(view(k.key)) + "\n";
    auto s = files::secret::create_exclusive(kek_path(v), text);
    wipe(text);
    if (s.code() == errc::already_exists) continue;
    if (!s) return s.err();
    keks_[v] = k;
    OPENSSL_cleanse(k.key.data(), k.key.size());
    if (opt_.on_rotate) opt_.on_rotate(v, scheduled);
    return v;
  }
  return make_error(errc::conflict, "could not claim a new KEK version in " + dir_ + " (too many concurrent rotations)");
}

result<std::uint32_t> keyring::rotate(sys_time now) {
  std::lock_guard lock(mu_);
  return rotate_locked(now, false);
}

result<std::optional<std::uint32_t>> keyring::rotate_if_due(sys_time now) {
  std::lock_guard lock(mu_);
  if (!keks_.empty() && unix_ns(now) - keks_.rbegin()->second.created_ns <
                            std::chrono::duration_cast<std::chrono::nanoseconds>(opt_.kek_rotation).count())
    return std::optional<std::uint32_t>();
  auto v = rotate_locked(now, true);
  if (!v) return v.err();
  return std::optional<std::uint32_t>(*v);
}

std::uint32_t keyring::current_kek_version() const {
  std::lock_guard lock(mu_);
  return keks_.empty() ? 0 : keks_.rbegin()->first;
}

result<const keyring::dek*> keyring::day_key(std::uint32_t day, bool create) {
  const std::string path = dek_path(day);
  // Sealing uses today's key, which no purge may touch: the cache suffices.
  // Opening checks the tombstone every time, since another process (`loom
  // keys purge`) may have destroyed a key this one still holds.
  if (create)
    if (auto it = deks_.find(day); it != deks_.end()) return &it->second;
  if (files::secret::exists(tombstone_path(day))) {
    if (auto it = deks_.find(day); it != deks_.end()) {
      OPENSSL_cleanse(it->second.key.data(), key_size);
      deks_.erase(it);
    }
    return destroyed_error(day);
  }
  if (auto it = deks_.find(day); it != deks_.end()) return &it->second;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto text = files::secret::read_private(path);
    if (text.ok()) {
      auto f = fields(*text);
      std::uint32_t fday = 0, kv = 0;
      auto nonce = f.size() == 6 ? crypto::from_hex(f[4]) : result<std::string>(make_error(errc::corruption, ""));
      auto wrapped = f.size() == 6 ? crypto::from_hex(f[5]) : result<std::string>(make_error(errc::corruption, ""));
      if (f.size() != 6 || f[0] != "loom-audit-dek" || f[1] != "v1" || !parse_int(f[2], fday) || fday != day ||
          !parse_int(f[3], kv) || !nonce || nonce->size() != nonce_size || !wrapped)
        return make_error(errc::corruption, path + " is not a data key file of day " + std::to_string(day));
      if (!keks_.count(kv)) (void)load_keks();  // rotated by another process
      auto kit = keks_.find(kv);
      if (kit == keks_.end())
        return make_error(errc::corruption, path + " is wrapped by KEK version " + std::to_string(kv) +
                                                ", which is missing from " + dir_);
      // The wrapped key is a sealed envelope of its own (no header needed).
      envelope_header h{.version = envelope_version, .kek_version = kv, .day = day, .nonce = {}};
      std::memcpy(h.nonce.data(), nonce->data(), nonce_size);
      std::string sealed = encode_header(h) + *wrapped;
      auto raw = open_with_key(view(kit->second.key), sealed, wrap_context(day, kv));
      if (!raw || raw->size() != key_size)
        return make_error(errc::corruption, path + " does not unwrap under KEK version " + std::to_string(kv));
      dek& slot = deks_[day];  // written in place: no stray copy of the key
      slot.kek_version = kv;
      std::memcpy(slot.key.data(), raw->data(), key_size);
      wipe(*raw);
      return &slot;
    }
    if (text.code() != errc::not_found) return text.err();
    if (!create) return make_error(errc::corruption, "no data key for " + day_name(day) + " (day " +
                                                         std::to_string(day) + ") in " + dir_);
    if (keks_.empty()) return make_error(errc::not_found, "no KEK in " + dir_);
    const std::uint32_t kv = keks_.rbegin()->first;
    key256 raw{};
    if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1)
      return make_error(errc::internal, "RAND_bytes failed");
    envelope_header h{.version = envelope_version, .kek_version = kv, .day = day, .nonce = random_nonce()};
    std::string sealed = seal_with_key(view(keks_[kv].key), h, view(raw), wrap_context(day, kv));
    std::string body = "loom-audit-dek v1 " + std::to_string(day) + " " + std::to_string(kv) + " " +
                       crypto::to_hex(std::string_view(sealed).substr(9, nonce_size)) + " " +
                       crypto::to_hex(std::string_view(sealed).substr(header_size)) + "\n";
    auto s = files::secret::create_exclusive(path, body);
    if (s.ok()) {
      dek& slot = deks_[day];
      slot.kek_version = kv;
      slot.key = raw;
      OPENSSL_cleanse(raw.data(), raw.size());
      return &slot;
    }
    OPENSSL_cleanse(raw.data(), raw.size());
    if (s.code() != errc::already_exists) return s.err();
    // Another process made today's key first: use theirs.
  }
  return make_error(errc::conflict, "data key file " + path + " keeps changing");
}

result<std::string> keyring::seal(std::string_view plaintext, const row_context& ctx, sys_time now) {
  if (auto r = rotate_if_due(now); !r) return r.err();
  std::lock_guard lock(mu_);
  const std::uint32_t day = day_of(now);
  auto k = day_key(day, true);
  if (!k) return k.err();
  envelope_header h{.version = envelope_version, .kek_version = (*k)->kek_version, .day = day, .nonce = random_nonce()};
  return seal_with_key(view((*k)->key), h, plaintext, context_bytes(ctx));
}

result<std::string> keyring::unseal(std::string_view sealed, const row_context& ctx) {
  auto h = parse_header(sealed);
  if (!h) return h.err();
  std::lock_guard lock(mu_);
  // A cached key may have been purged by another process since: the
  // tombstone check in day_key catches it.
  auto k = day_key(h->day, false);
  if (!k) return k.err();
  if ((*k)->kek_version != h->kek_version)
    return make_error(errc::corruption, "authentication failed: the header names KEK version " +
                                            std::to_string(h->kek_version) + " but the day key of " +
                                            day_name(h->day) + " is wrapped by version " +
                                            std::to_string((*k)->kek_version));
  return open_with_key(view((*k)->key), sealed, context_bytes(ctx));
}

status keyring::purge(std::uint32_t day, sys_time now) {
  std::lock_guard lock(mu_);
  return purge_locked(day, now);
}

status keyring::purge_locked(std::uint32_t day, sys_time now) {
  const std::uint32_t today = day_of(now);
  const auto keep = static_cast<std::uint32_t>(opt_.retention.count());
  // The day's last event is (today - day - 1) whole days old: it may go when
  // that reaches the retention.
  if (day >= today || today - day - 1 < keep) {
    std::uint32_t first = day + keep + 1;
    return make_error(errc::invalid_argument,
                      "retention: the data key of " + day_name(day) + " (day " + std::to_string(day) +
                          ") is younger than the retention of " + std::to_string(keep) +
                          " days; it may be purged from " + day_name(first) + " on");
  }
  const bool has_key = files::secret::exists(dek_path(day));
  const bool has_tombstone = files::secret::exists(tombstone_path(day));
  if (!has_key && !has_tombstone)
    return make_error(errc::not_found, "no data key for " + day_name(day) + " (day " + std::to_string(day) + ")");
  // Tombstone first: a crash before the shred leaves a key that no reader
  // uses and that the next purge finishes off.
  if (!has_tombstone) {
    auto s = files::secret::create_exclusive(tombstone_path(day), "destroyed " + std::to_string(unix_ns(now)) + "\n", 0644);
    if (!s && s.code() != errc::already_exists) return s;
  }
  if (auto it = deks_.find(day); it != deks_.end()) {
    OPENSSL_cleanse(it->second.key.data(), key_size);
    deks_.erase(it);
  }
  if (has_key) {
    auto s = files::secret::shred(dek_path(day));
    if (!s && s.code() != errc::not_found) return s;
  }
  return ok_status();
}

result<std::vector<std::uint32_t>> keyring::purge_expired(sys_time now) {
  auto keys = day_keys();
  if (!keys) return keys.err();
  std::lock_guard lock(mu_);
  std::vector<std::uint32_t> done;
  const std::uint32_t today = day_of(now);
  for (const auto& k : *keys) {
    if (k.destroyed || k.day >= today || today - k.day - 1 < static_cast<std::uint32_t>(opt_.retention.count()))
      continue;
    if (auto s = purge_locked(k.day, now); !s) return s.err();
    done.push_back(k.day);
  }
  return done;
}

result<std::vector<day_key_info>> keyring::day_keys() const {
  std::map<std::uint32_t, day_key_info> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("dek-", 0) != 0) continue;
    auto dot = name.find('.');
    std::uint32_t day = 0;
    if (dot == std::string::npos || !parse_int(std::string_view(name).substr(4, dot - 4), day)) continue;
    std::string ext = name.substr(dot);
    auto& info = out[day];
    info.day = day;
    if (ext == ".destroyed") {
      info.destroyed = true;
      info.kek_version = 0;
    } else if (ext == ".key" && !info.destroyed) {
      auto text = files::read_file(e.path().string());
      auto f = text.ok() ? fields(*text) : std::vector<std::string_view>{};
      if (f.size() == 6) (void)parse_int(f[3], info.kek_version);
      if (text.ok()) wipe(*text);
    }
  }
  if (ec) return make_error(errc::unavailable, "cannot list " + dir_ + ": " + ec.message());
  std::vector<day_key_info> v;
  for (auto& [d, i] : out) v.push_back(i);
  return v;
}

}  // namespace loom::auditchain
