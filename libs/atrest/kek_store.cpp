#include "libs/atrest/kek_store.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/files/secret_files.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <sstream>

namespace loom::atrest {
namespace {

std::int64_t ns_of(sys_time t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

template <class T>
bool parse_int(const std::string& s, T& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// "kek-000123.key" -> 123
bool version_of(const std::string& name, std::uint32_t& v) {
  if (name.size() != 14 || !name.starts_with("kek-") || !name.ends_with(".key")) return false;
  return parse_int(name.substr(4, 6), v) && v > 0;
}

struct parsed {
  std::uint32_t version = 0;
  std::int64_t created_ns = 0;
  key256 key{};
};

// One KEK file's text; corruption naming the file when it is not one.
result<parsed> parse_file(const std::string& path, std::string text, std::uint32_t want) {
  std::istringstream in(text);
  std::string tag, fmt, v, created, hex;
  in >> tag >> fmt >> v >> created >> hex;
  parsed p;
  auto key = crypto::from_hex(hex);
  const bool good = tag == "loom-atrest-kek" && fmt == "v1" && parse_int(v, p.version) && p.version == want &&
                    parse_int(created, p.created_ns) && key.ok() && key->size() == p.key.size();
  if (good) std::copy(key->begin(), key->end(), p.key.begin());
  if (key.ok()) OPENSSL_cleanse(key->data(), key->size());
  OPENSSL_cleanse(text.data(), text.size());
  OPENSSL_cleanse(hex.data(), hex.size());
  if (!good) return make_error(errc::corruption, path + " is not an at-rest key-encryption key file of version " +
                                                      std::to_string(want));
  return p;
}

}  // namespace

kek_store::~kek_store() {
  for (auto& [v, k] : keks_) OPENSSL_cleanse(k.key.data(), k.key.size());
}

std::string kek_store::path_of(std::uint32_t v) const {
  char b[32];
  std::snprintf(b, sizeof b, "/kek-%06u.key", v);
  return dir_ + b;
}

result<std::unique_ptr<kek_store>> kek_store::open(const std::string& dir, kek_options o, sys_time now) {
  if (o.rotation.count() < 1 || o.rotation.count() > 3650)
    return make_error(errc::invalid_argument, "the at-rest key rotation must be 1..3650 days, not " +
                                                  std::to_string(o.rotation.count()));
  if (o.create)
    if (auto st = files::secret::make_private_dir(dir); !st) return st.err();
  std::unique_ptr<kek_store> k(new kek_store(dir, std::move(o)));
  std::uint32_t made = 0;
  {
    std::lock_guard lock(k->mu_);
    if (auto st = k->load(); !st) return st.err();
    if (k->keks_.empty()) {
      if (!k->opt_.create) return make_error(errc::not_found, "no at-rest key-encryption key in " + dir);
      auto v = k->rotate_locked(now);
      if (!v) return v.err();
      made = *v;
    }
  }
  (void)made;  // version 1 of a new deployment is not a rotation
  return k;
}

status kek_store::load() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    std::uint32_t v = 0;
    if (!version_of(e.path().filename().string(), v) || keks_.count(v)) continue;
    auto text = files::secret::read_private(e.path().string());
    if (!text) return text.err();
    auto p = parse_file(e.path().string(), std::move(*text), v);
    if (!p) return p.err();
    keks_[v] = kek{p->key, p->created_ns};
    OPENSSL_cleanse(p->key.data(), p->key.size());
  }
  if (ec && ec != std::errc::no_such_file_or_directory)
    return make_error(errc::unavailable, "cannot list " + dir_ + ": " + ec.message());
  return ok_status();
}

result<std::uint32_t> kek_store::rotate_locked(sys_time now) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (auto st = load(); !st) return st.err();
    const std::uint32_t v = keks_.empty() ? 1 : keks_.rbegin()->first + 1;
    kek k;
    if (RAND_bytes(k.key.data(), static_cast<int>(k.key.size())) != 1)
      return make_error(errc::internal, "RAND_bytes failed making an at-rest key-encryption key");
    k.created_ns = ns_of(now);
    std::string hex = crypto::to_hex(std::string_view(reinterpret_cast<const char*>(k.key.data()), k.key.size()));
    std::string text = "loom-atrest-kek v1 " + std::to_string(v) + " " + std::to_string(k.created_ns) + " " + hex + "\n";
    auto st = files::secret::create_exclusive(path_of(v), text);
    OPENSSL_cleanse(text.data(), text.size());
    OPENSSL_cleanse(hex.data(), hex.size());
    if (st.code() == errc::already_exists) continue;  // another process made v: read it, try v + 1
    if (!st) return st.err();
    keks_[v] = k;
    OPENSSL_cleanse(k.key.data(), k.key.size());
    return v;
  }
  return make_error(errc::conflict, "could not make a new at-rest key-encryption key in " + dir_ +
                                        ": other processes kept making the same version");
}

status kek_store::rotate_if_due(sys_time now) {
  auto k = for_wrap(now);
  if (!k) return k.err();
  OPENSSL_cleanse(k->second.data(), k->second.size());
  return ok_status();
}

result<std::pair<std::uint32_t, key256>> kek_store::for_wrap(sys_time now) {
  std::optional<std::uint32_t> rotated;
  std::pair<std::uint32_t, key256> out;
  {
    std::lock_guard lock(mu_);
    if (keks_.empty() || ns_of(now) - keks_.rbegin()->second.created_ns >=
                             std::chrono::duration_cast<std::chrono::nanoseconds>(opt_.rotation).count()) {
      // Another process may have rotated already: only rotate when the newest on disk is due too.
      if (auto st = load(); !st) return st.err();
      if (keks_.empty() || ns_of(now) - keks_.rbegin()->second.created_ns >=
                               std::chrono::duration_cast<std::chrono::nanoseconds>(opt_.rotation).count()) {
        auto v = rotate_locked(now);
        if (!v) return v.err();
        rotated = *v;
      }
    }
    out = {keks_.rbegin()->first, keks_.rbegin()->second.key};
  }
  if (rotated && opt_.on_rotate) opt_.on_rotate(*rotated, true);
  return out;
}

result<key256> kek_store::get(std::uint32_t version) {
  std::lock_guard lock(mu_);
  if (!keks_.count(version))
    if (auto st = load(); !st) return st.err();
  auto it = keks_.find(version);
  if (it == keks_.end())
    return make_error(errc::not_found, "at-rest key-encryption key version " + std::to_string(version) +
                                           " is not in " + dir_ + " (" + path_of(version) +
                                           " missing: the keys of another deployment, or lost)");
  return it->second.key;
}

result<std::uint32_t> kek_store::rotate(sys_time now) {
  result<std::uint32_t> v = make_error(errc::internal, "not rotated");
  {
    std::lock_guard lock(mu_);
    v = rotate_locked(now);
  }
  if (v && opt_.on_rotate) opt_.on_rotate(*v, false);
  return v;
}

std::vector<kek_info> kek_store::list() const {
  std::lock_guard lock(mu_);
  std::vector<kek_info> out;
  for (const auto& [v, k] : keks_) out.push_back({v, k.created_ns});
  return out;
}

result<std::vector<kek_info>> list_keks(const std::string& dir) {
  std::vector<kek_info> out;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::uint32_t v = 0;
    if (!version_of(e.path().filename().string(), v)) continue;
    auto text = files::secret::read_private(e.path().string());
    if (!text) return text.err();
    auto p = parse_file(e.path().string(), std::move(*text), v);
    if (!p) return p.err();
    OPENSSL_cleanse(p->key.data(), p->key.size());
    out.push_back({v, p->created_ns});
  }
  if (ec) return make_error(errc::unavailable, "cannot list " + dir + ": " + ec.message());
  std::sort(out.begin(), out.end(), [](const kek_info& a, const kek_info& b) { return a.version < b.version; });
  return out;
}

}  // namespace loom::atrest
