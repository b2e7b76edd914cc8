#include "libs/auditchain/row.hpp"

#include "libs/crypto/encoding.hpp"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace loom::auditchain {
namespace {

constexpr std::string_view row_tag_v1 = "loom.auditchain.row.v1";
constexpr std::string_view row_tag_v2 = "loom.auditchain.row.v2";

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fatal: OpenSSL %s failed\n", what);
  std::abort();
}

void put_u32(std::string& out, std::uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (24 - 8 * i));
  out.append(b, 4);
}

void put_u64(std::string& out, std::uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (56 - 8 * i));
  out.append(b, 8);
}

void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}

}  // namespace

void append_canonical(const chain_row& r, std::string& out) {
  const bool v1 = r.version == row_version_v1;
  put_str(out, v1 ? row_tag_v1 : row_tag_v2);
  put_u64(out, r.seq);
  put_u64(out, static_cast<std::uint64_t>(r.unix_ns));
  put_str(out, r.source);
  put_u64(out, r.source_seq);
  for (const std::string* s : {&r.service, &r.peer_key, &r.principal, &r.role, &r.zone, &r.action, &r.job_id,
                               &r.request_id})
    put_str(out, *s);
  put_u32(out, static_cast<std::uint32_t>(r.decision));
  put_str(out, r.reason);
  put_str(out, r.payload);
  if (!v1) put_str(out, r.tenant);
}

std::string canonical_bytes(const chain_row& r) {
  std::string out;
  append_canonical(r, out);
  return out;
}

status valid_row(const chain_row& r) {
  if (r.seq == 0) return make_error(errc::invalid_argument, "audit row: seq must be at least 1");
  if (r.version != row_version_v1 && r.version != current_row_version)
    return make_error(errc::invalid_argument, "audit row " + std::to_string(r.seq) + ": unknown row version " +
                                                  std::to_string(r.version));
  if (r.version == row_version_v1 && !r.tenant.empty())
    return make_error(errc::invalid_argument,
                      "audit row " + std::to_string(r.seq) + ": a version 1 row carries no tenant");
  constexpr std::size_t limit = std::numeric_limits<std::uint32_t>::max();
  for (const std::string* s : {&r.source, &r.service, &r.peer_key, &r.principal, &r.role, &r.zone, &r.action,
                               &r.job_id, &r.request_id, &r.reason, &r.payload, &r.tenant}) {
    if (s->size() >= limit)
      return make_error(errc::invalid_argument, "audit row " + std::to_string(r.seq) + ": a field of 4 GiB or more");
  }
  return ok_status();
}

// A fetched EVP_MD and one reusable context: EVP_sha256() with a fresh context
// per row pays an implicit provider fetch each time (measurably slower at
// hundreds of thousands of rows per second).
struct row_hasher::impl {
  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~impl() {
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(md);
  }
};

row_hasher::row_hasher() : impl_(std::make_unique<impl>()) {
  if (!impl_->md || !impl_->ctx) die("SHA256 fetch");
}
row_hasher::~row_hasher() = default;

hash32 row_hasher::hash(const hash32& prev_hash, const chain_row& r) {
  buf_.clear();
  buf_.append(reinterpret_cast<const char*>(prev_hash.data()), prev_hash.size());
  append_canonical(r, buf_);
  hash32 out{};
  unsigned len = 0;
  if (EVP_DigestInit_ex2(impl_->ctx, impl_->md, nullptr) != 1 ||
      EVP_DigestUpdate(impl_->ctx, buf_.data(), buf_.size()) != 1 ||
      EVP_DigestFinal_ex(impl_->ctx, out.data(), &len) != 1)
    die("SHA256");
  return out;
}

hash32 compute_row_hash(const hash32& prev_hash, const chain_row& r) {
  thread_local row_hasher h;
  return h.hash(prev_hash, r);
}

void link(chain_tail& tail, chain_row& r, row_hasher& h) {
  r.seq = tail.last_seq + 1;
  r.prev_hash = tail.last_hash;
  r.row_hash = h.hash(r.prev_hash, r);
  tail.last_seq = r.seq;
  tail.last_hash = r.row_hash;
}

std::string_view as_view(const hash32& h) { return {reinterpret_cast<const char*>(h.data()), h.size()}; }

std::string to_hex(const hash32& h) { return crypto::to_hex(as_view(h)); }

std::optional<hash32> hash_from_bytes(std::string_view bytes) {
  if (bytes.size() != 32) return std::nullopt;
  hash32 h{};
  std::memcpy(h.data(), bytes.data(), 32);
  return h;
}

}  // namespace loom::auditchain
