#include "libs/atrest/ephemeral.hpp"

#include "libs/atrest/seal_format.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <cstring>
#include <stdexcept>

namespace loom::atrest {
namespace {
std::string aad_of(const std::string& label, std::uint64_t index) {
  std::string a = "loom.atrest.ephemeral.v1\n" + label + "\n";
  unsigned char i[8];
  detail::put64(i, index);
  a.append(reinterpret_cast<const char*>(i), 8);
  return a;
}
}  // namespace

ephemeral_key::ephemeral_key(std::string label) : label_(std::move(label)) {
  if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1)
    throw std::runtime_error("ephemeral_key: the OS CSPRNG gave no key");
}

ephemeral_key::~ephemeral_key() { OPENSSL_cleanse(key_.data(), key_.size()); }

std::string ephemeral_key::seal(std::string_view plain, std::uint64_t index) const {
  std::string out;
  seal_into(plain, index, out);
  return out;
}

void ephemeral_key::seal_into(std::string_view plain, std::uint64_t index, std::string& out) const {
  out.resize(overhead + plain.size());
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  detail::put32(p, static_cast<std::uint32_t>(plain.size()));
  if (RAND_bytes(p + 4, 12) != 1) throw std::runtime_error("ephemeral_key: the OS CSPRNG gave no nonce");
  const std::string aad = aad_of(label_, index);
  auto c = detail::new_ctx();
  if (!c || !detail::gcm(c.get(), true, key_, p + 4, reinterpret_cast<const unsigned char*>(aad.data()), aad.size(),
                         nullptr, 0, reinterpret_cast<const unsigned char*>(plain.data()), plain.size(), p + 16,
                         p + 16 + plain.size()))
    throw std::runtime_error("ephemeral_key: AES-256-GCM failed");
}

result<std::string> ephemeral_key::open_all(std::string_view records, const std::string& what) const {
  std::string out(records);
  if (auto st = open_in_place(out, what); !st) return st.err();
  return out;
}

status ephemeral_key::open_in_place(std::string& records, const std::string& what) const {
  auto c = detail::new_ctx();
  if (!c) return make_error(errc::internal, what + ": no cipher context");
  auto* base = reinterpret_cast<unsigned char*>(records.data());
  std::size_t put = 0;  // plaintext so far, at the front (always behind the record being read)
  std::uint64_t index = 0;
  for (std::size_t at = 0; at < records.size(); ++index) {
    unsigned char* p = base + at;
    const std::size_t left = records.size() - at;
    const std::size_t n = left >= 4 ? detail::get32(p) : 0;
    if (left < overhead || left - overhead < n)
      return make_error(errc::corruption, what + ": record " + std::to_string(index) + " at byte " +
                                              std::to_string(at) + " is cut short");
    const std::string aad = aad_of(label_, index);
    unsigned char tag[16];
    std::copy(p + 16 + n, p + 32 + n, tag);
    // Decrypted where it lies (in == out), then moved down to the front.
    if (!detail::gcm(c.get(), false, key_, p + 4, reinterpret_cast<const unsigned char*>(aad.data()), aad.size(),
                     nullptr, 0, p + 16, n, p + 16, tag))
      return make_error(errc::corruption, what + ": record " + std::to_string(index) + " at byte " +
                                              std::to_string(at) + " does not authenticate (altered, moved or " +
                                              "from another process)");
    std::memmove(base + put, p + 16, n);
    put += n;
    at += overhead + n;
  }
  records.resize(put);
  return ok_status();
}

status ephemeral_key::open_one(std::string_view record, std::uint64_t index, const std::string& what,
                               std::string& out) const {
  const auto* p = reinterpret_cast<const unsigned char*>(record.data());
  if (record.size() < overhead || detail::get32(p) != record.size() - overhead)
    return make_error(errc::corruption, what + ": record " + std::to_string(index) + " has the wrong length (" +
                                            std::to_string(record.size()) + " bytes)");
  auto c = detail::new_ctx();
  if (!c) return make_error(errc::internal, what + ": no cipher context");
  const std::size_t n = record.size() - overhead;
  out.resize(n);
  const std::string aad = aad_of(label_, index);
  unsigned char tag[16];
  std::copy(p + 16 + n, p + 32 + n, tag);
  if (!detail::gcm(c.get(), false, key_, p + 4, reinterpret_cast<const unsigned char*>(aad.data()), aad.size(),
                   nullptr, 0, p + 16, n, reinterpret_cast<unsigned char*>(out.data()), tag))
    return make_error(errc::corruption, what + ": record " + std::to_string(index) +
                                            " does not authenticate (altered, moved or from another process)");
  return ok_status();
}

}  // namespace loom::atrest
