#include "libs/atrest/sealed.hpp"

#include "libs/atrest/read_whole.hpp"
#include "libs/atrest/seal_format.hpp"

#include "libs/files/files.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::atrest {
using namespace detail;
namespace {

const unsigned char* u(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

// The chunk layout a body of `body` bytes must have: the count and the last chunk's plaintext size.
bool layout(std::size_t body, std::uint32_t chunk, std::size_t& count, std::size_t& last_plain) {
  const std::size_t full = std::size_t{chunk} + sealed_tag_size;
  if (body < sealed_tag_size) return false;
  count = (body + full - 1) / full;
  const std::size_t rest = body - (count - 1) * full;  // the last chunk, tag included
  if (rest < sealed_tag_size) return false;
  last_plain = rest - sealed_tag_size;
  // A last chunk of 0 bytes only when it is the only one (an empty object).
  return !(last_plain == 0 && count > 1);
}

}  // namespace

bool looks_sealed(std::string_view head) {
  return head.size() >= sizeof magic && std::memcmp(head.data(), magic, sizeof magic) == 0;
}

std::optional<std::uint64_t> sealed_plain_size(std::string_view head, std::uint64_t file_size) {
  if (head.size() < sealed_header_size || !looks_sealed(head) || file_size < sealed_header_size) return std::nullopt;
  const auto* h = u(head);
  const std::uint32_t chunk = get32(h + 16);
  if (get32(h + 8) != format_version || chunk < min_chunk || chunk > max_chunk) return std::nullopt;
  std::size_t count = 0, last_plain = 0;
  if (!layout(static_cast<std::size_t>(file_size - sealed_header_size), chunk, count, last_plain)) return std::nullopt;
  return std::uint64_t{(count - 1)} * chunk + last_plain;
}

status seal_into(std::string_view plain, kek_store& keys, sys_time now, std::string& out, std::uint32_t chunk) {
  auto c = new_ctx();
  unsigned char header[sealed_header_size];
  key256 dek{};
  if (auto st = begin_object(keys, now, chunk, c.get(), header, dek); !st) return st;
  const std::size_t count = plain.empty() ? 1 : (plain.size() + chunk - 1) / chunk;
  out.resize(sealed_header_size + plain.size() + count * sealed_tag_size);
  std::memcpy(out.data(), header, sealed_header_size);
  auto* dst = reinterpret_cast<unsigned char*>(out.data()) + sealed_header_size;
  const auto* src = reinterpret_cast<const unsigned char*>(plain.data());
  bool ok = true;
  for (std::size_t i = 0; ok && i < count; ++i) {
    const std::size_t off = i * std::size_t{chunk};
    const std::size_t n = std::min<std::size_t>(chunk, plain.size() - off);
    ok = seal_chunk(c.get(), dek, header, i, i + 1 == count, src + off, n, dst);
    dst += n + sealed_tag_size;
  }
  OPENSSL_cleanse(dek.data(), dek.size());
  if (!ok) return make_error(errc::internal, "AES-256-GCM failed sealing an object");
  return ok_status();
}

result<std::string> seal(std::string_view plain, kek_store& keys, sys_time now, std::uint32_t chunk) {
  std::string out;
  if (auto st = seal_into(plain, keys, now, out, chunk); !st) return st.err();
  return out;
}

namespace {

// A sealed object's header (`h`: its first 92 bytes) checked and its data
// key unwrapped into `dek` (with `c`), for a body of `body` bytes: its chunk
// size, chunk count and the last chunk's plaintext size.
status open_object(const unsigned char* h, std::size_t body, kek_store& keys, const std::string& what,
                   EVP_CIPHER_CTX* c, key256& dek, std::uint32_t& chunk, std::size_t& count, std::size_t& last_plain) {
  auto bad = [&](const std::string& why) { return make_error(errc::corruption, what + ": " + why); };
  if (get32(h + 8) != format_version)
    return bad("sealed format version " + std::to_string(get32(h + 8)) + " is not 1");
  chunk = get32(h + 16);
  if (chunk < min_chunk || chunk > max_chunk || get32(h + 20) != 0)
    return bad("the sealed header is damaged (chunk size " + std::to_string(chunk) + ")");
  if (!layout(body, chunk, count, last_plain))
    return bad("a sealed object of " + std::to_string(body + sealed_header_size) + " bytes cannot be whole: cut or extended");
  auto kek = keys.get(get32(h + 12));
  if (!kek) return error{kek.code(), what + ": " + kek.err().message};
  unsigned char tag[sealed_tag_size];
  std::memcpy(tag, h + wrap_tag_at, sizeof tag);
  bool ok = c && gcm(c, false, *kek, h + wrap_nonce_at, h, wrap_aad_size, nullptr, 0, h + wrapped_at, dek.size(),
                     dek.data(), tag);
  OPENSSL_cleanse(kek->data(), kek->size());
  if (!ok) {
    OPENSSL_cleanse(dek.data(), dek.size());
    return bad("its data key does not unwrap under KEK version " + std::to_string(get32(h + 12)) +
               ": the header was changed or the object is another deployment's");
  }
  return ok_status();
}

// Chunk i of `count` (n plaintext bytes; `src`: its n ciphertext bytes, then
// the tag) decrypted and verified into `out`.
status open_chunk(EVP_CIPHER_CTX* c, const key256& dek, const unsigned char* h, std::uint32_t chunk, std::size_t i,
                  std::size_t count, std::size_t n, const unsigned char* src, unsigned char* out,
                  const std::string& what) {
  unsigned char iv[12], idx[9], tag[sealed_tag_size];
  std::memcpy(iv, h + 24, 8);
  put32(iv + 8, static_cast<std::uint32_t>(i));
  put64(idx, i);
  idx[8] = i + 1 == count ? 1 : 0;
  std::memcpy(tag, src + n, sizeof tag);
  if (!gcm(c, false, dek, iv, h, sealed_header_size, idx, sizeof idx, src, n, out, tag)) {
    OPENSSL_cleanse(out, n);
    const std::size_t from = i * std::size_t{chunk};
    return make_error(errc::corruption, what + ": chunk " + std::to_string(i) + " (plaintext bytes " +
                                            std::to_string(from) + ".." + std::to_string(from + n) +
                                            ") fails authentication: changed, cut, reordered or not sealed by "
                                            "this deployment");
  }
  return ok_status();
}

// The one unsealing walk, over a header (`h`: the first 92 bytes) and a body
// of `body` bytes that `chunk_at(i, n)` hands out chunk by chunk (its n
// ciphertext bytes and tag, or null when it cannot be read: `read_error`
// says why). Each chunk is decrypted into `dst(i, n)`'s n bytes and then
// handed to `done(i, n)`; the first error ends it. `sized(total)` is told the
// plaintext's size before the first chunk.
status unseal_walk(const unsigned char* h, std::size_t body, kek_store& keys, const std::string& what,
                   const std::function<status(std::size_t)>& sized,
                   const std::function<const unsigned char*(std::size_t i, std::size_t n)>& chunk_at,
                   const std::function<unsigned char*(std::size_t i, std::size_t n)>& dst,
                   const std::function<status(std::size_t i, std::size_t n)>& done, const std::string* read_error) {
  auto c = new_ctx();
  key256 dek{};
  std::uint32_t chunk = 0;
  std::size_t count = 0, last_plain = 0;
  if (auto st = open_object(h, body, keys, what, c.get(), dek, chunk, count, last_plain); !st) return st;
  struct wipe {
    key256& k;
    ~wipe() { OPENSSL_cleanse(k.data(), k.size()); }
  } wipe_dek{dek};
  if (auto st = sized((count - 1) * std::size_t{chunk} + last_plain); !st) return st;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t n = i + 1 == count ? last_plain : chunk;
    const unsigned char* src = chunk_at(i, n);
    if (!src) return make_error(errc::corruption, what + ": " + (read_error ? *read_error : "cannot be read"));
    if (auto st = open_chunk(c.get(), dek, h, chunk, i, count, n, src, dst(i, n), what); !st) return st;
    if (auto st = done(i, n); !st) return st;
  }
  return ok_status();
}

}  // namespace

status unseal_into(std::string_view sealed, kek_store& keys, const std::string& what, std::string& out) {
  if (sealed.size() < sealed_header_size + sealed_tag_size || !looks_sealed(sealed))
    return make_error(errc::corruption, what + ": not a sealed object (no LOOMSEAL header, or shorter than one)");
  const auto* h = u(sealed);
  const unsigned char* body = h + sealed_header_size;
  std::size_t at = 0;  // of the chunk being read in the body, and of its plaintext in `out`
  std::size_t plain_at = 0;
  auto st = unseal_walk(
      h, sealed.size() - sealed_header_size, keys, what,
      [&](std::size_t total) {
        out.resize(total);
        return ok_status();
      },
      [&](std::size_t, std::size_t) { return body + at; },
      [&](std::size_t, std::size_t) { return reinterpret_cast<unsigned char*>(out.data()) + plain_at; },
      [&](std::size_t, std::size_t n) {
        at += n + sealed_tag_size;
        plain_at += n;
        return ok_status();
      },
      nullptr);
  if (!st) OPENSSL_cleanse(out.data(), out.size());
  return st;
}

status unseal_file(const std::string& path, kek_store& keys, const std::function<status(std::string_view)>& sink) {
  auto r = sealed_reader::open(path, keys);
  if (!r) return r.err();
  std::string plain((*r)->chunk_size(), '\0');
  // Reads of one chunk's size stay on chunk boundaries: each is one verified chunk.
  for (bool first = true;; first = false) {
    auto got = (*r)->read(plain.data(), plain.size());
    if (!got) return got.err();
    if (*got == 0 && !first) return ok_status();
    if (auto st = sink(std::string_view(plain.data(), *got)); !st) return st;
    if (*got == 0) return ok_status();  // an empty object: its one empty chunk
  }
}

result<std::string> unseal(std::string_view sealed, kek_store& keys, const std::string& what) {
  std::string out;
  if (auto st = unseal_into(sealed, keys, what, out); !st) return st.err();
  return out;
}

status write_sealed(const std::string& path, std::string_view plain, kek_store& keys, sys_time now,
                    std::uint32_t chunk, mode_t mode) {
  auto s = seal(plain, keys, now, chunk);
  if (!s) return s.err();
  return files::write_atomic(path, *s, mode);
}

result<std::string> read_sealed(const std::string& path, kek_store& keys) {
  auto bytes = files::read_file(path);
  if (!bytes) return bytes.err();
  return unseal(*bytes, keys, path);
}

status read_sealed_into(const std::string& path, kek_store& keys, std::string& scratch, std::string& out) {
  if (auto st = detail::read_whole(path, scratch); !st) return st;
  return unseal_into(scratch, keys, path, out);
}

struct sealed_reader::impl {
  int fd = -1;
  std::string path;
  unsigned char h[sealed_header_size] = {};
  key256 dek{};
  cipher_ctx c = new_ctx();
  std::uint32_t chunk = 0;
  std::size_t count = 0, last_plain = 0, next = 0;  // chunks, and the next one to read
  std::uint64_t file_at = sealed_header_size, plain_size = 0;
  std::string cipher, plain;  // one chunk each
  std::size_t plain_at = 0;   // of `plain` handed out
  ~impl() {
    OPENSSL_cleanse(dek.data(), dek.size());
    if (!plain.empty()) OPENSSL_cleanse(plain.data(), plain.size());
    if (fd >= 0) ::close(fd);
  }
  // Exactly n bytes at file_at into `cipher`.
  status read_at(std::size_t n) {
    cipher.resize(n);
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, cipher.data() + got, n - got, static_cast<off_t>(file_at + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return files::errno_error("read", path);
      if (r == 0) return make_error(errc::corruption, path + ": shrank while it was read");
      got += static_cast<std::size_t>(r);
    }
    file_at += n;
    return ok_status();
  }
};

sealed_reader::sealed_reader(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
sealed_reader::~sealed_reader() = default;
std::uint64_t sealed_reader::size() const { return impl_->plain_size; }
std::uint32_t sealed_reader::chunk_size() const { return impl_->chunk; }

result<std::unique_ptr<sealed_reader>> sealed_reader::open(const std::string& path, kek_store& keys) {
  auto m = std::make_unique<impl>();
  m->path = path;
  m->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (m->fd < 0) return files::errno_error("open", path);
  struct stat st {};
  if (::fstat(m->fd, &st) != 0) return files::errno_error("stat", path);
  const auto size = static_cast<std::size_t>(st.st_size);
  m->file_at = 0;
  if (size < sealed_header_size + sealed_tag_size || !m->read_at(sealed_header_size) || !looks_sealed(m->cipher))
    return make_error(errc::corruption, path + ": not a sealed object (no LOOMSEAL header, or shorter than one)");
  std::memcpy(m->h, m->cipher.data(), sealed_header_size);
  if (!m->c) return make_error(errc::internal, "no cipher context");
  if (auto s = open_object(m->h, size - sealed_header_size, keys, path, m->c.get(), m->dek, m->chunk, m->count,
                           m->last_plain);
      !s)
    return s.err();
  m->plain_size = std::uint64_t{m->count - 1} * m->chunk + m->last_plain;
  return std::unique_ptr<sealed_reader>(new sealed_reader(std::move(m)));
}

result<std::size_t> sealed_reader::read(void* out, std::size_t n) {
  impl& m = *impl_;
  auto* dst = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < n) {
    if (m.plain_at == m.plain.size()) {
      if (m.next == m.count) break;  // the end
      const std::size_t len = m.next + 1 == m.count ? m.last_plain : m.chunk;
      if (auto st = m.read_at(len + sealed_tag_size); !st) return st.err();
      m.plain.resize(len);
      if (auto st = open_chunk(m.c.get(), m.dek, m.h, m.chunk, m.next, m.count, len, u(m.cipher),
                               reinterpret_cast<unsigned char*>(m.plain.data()), m.path);
          !st)
        return st.err();
      ++m.next;
      m.plain_at = 0;
      if (len == 0) continue;
    }
    const std::size_t k = std::min(n - done, m.plain.size() - m.plain_at);
    std::memcpy(dst + done, m.plain.data() + m.plain_at, k);
    m.plain_at += k;
    done += k;
  }
  return done;
}

}  // namespace loom::atrest

namespace loom::atrest::detail {

status read_whole(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    auto e = files::errno_error("stat", path);
    ::close(fd);
    return e;
  }
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      auto e = n < 0 ? files::errno_error("read", path)
                     : make_error(errc::corruption, path + " shrank while it was read");
      ::close(fd);
      return e;
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return ok_status();
}


}  // namespace loom::atrest::detail
