#include "libs/atrest/sealed.hpp"

#include "libs/atrest/read_whole.hpp"
#include "libs/atrest/seal_format.hpp"

#include "libs/files/files.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

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
  auto bad = [&](const std::string& why) { return make_error(errc::corruption, what + ": " + why); };
  if (get32(h + 8) != format_version)
    return bad("sealed format version " + std::to_string(get32(h + 8)) + " is not 1");
  const std::uint32_t chunk = get32(h + 16);
  if (chunk < min_chunk || chunk > max_chunk || get32(h + 20) != 0)
    return bad("the sealed header is damaged (chunk size " + std::to_string(chunk) + ")");
  std::size_t count = 0, last_plain = 0;
  if (!layout(body, chunk, count, last_plain))
    return bad("a sealed object of " + std::to_string(body + sealed_header_size) + " bytes cannot be whole: cut or extended");
  auto kek = keys.get(get32(h + 12));
  if (!kek) return error{kek.code(), what + ": " + kek.err().message};
  auto c = new_ctx();
  key256 dek{};
  unsigned char tag[sealed_tag_size];
  std::memcpy(tag, h + wrap_tag_at, sizeof tag);
  bool ok = c && gcm(c.get(), false, *kek, h + wrap_nonce_at, h, wrap_aad_size, nullptr, 0, h + wrapped_at,
                     dek.size(), dek.data(), tag);
  OPENSSL_cleanse(kek->data(), kek->size());
  if (!ok) {
    OPENSSL_cleanse(dek.data(), dek.size());
    return bad("its data key does not unwrap under KEK version " + std::to_string(get32(h + 12)) +
               ": the header was changed or the object is another deployment's");
  }
  struct wipe {
    key256& k;
    ~wipe() { OPENSSL_cleanse(k.data(), k.size()); }
  } wipe_dek{dek};
  if (auto st = sized((count - 1) * std::size_t{chunk} + last_plain); !st) return st;
  unsigned char iv[12], idx[9];
  std::memcpy(iv, h + 24, 8);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t n = i + 1 == count ? last_plain : chunk;
    const unsigned char* src = chunk_at(i, n);
    if (!src) return bad(read_error ? *read_error : "cannot be read");
    put32(iv + 8, static_cast<std::uint32_t>(i));
    put64(idx, i);
    idx[8] = i + 1 == count ? 1 : 0;
    std::memcpy(tag, src + n, sizeof tag);
    unsigned char* out = dst(i, n);
    if (!gcm(c.get(), false, dek, iv, h, sealed_header_size, idx, sizeof idx, src, n, out, tag)) {
      OPENSSL_cleanse(out, n);
      const std::size_t from = i * std::size_t{chunk};
      return bad("chunk " + std::to_string(i) + " (plaintext bytes " + std::to_string(from) + ".." +
                 std::to_string(from + n) + ") fails authentication: changed, cut, reordered or not sealed by "
                 "this deployment");
    }
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
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_fd{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return files::errno_error("stat", path);
  const auto size = static_cast<std::size_t>(st.st_size);
  std::string buf, plain;  // one chunk of ciphertext (and its tag), one of plaintext
  std::string read_error;
  auto read_at = [&](std::size_t off, std::size_t n) -> bool {
    buf.resize(n);
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, buf.data() + got, n - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        read_error = r < 0 ? std::string("read: ") + std::strerror(errno) : "shrank while it was read";
        return false;
      }
      got += static_cast<std::size_t>(r);
    }
    return true;
  };
  if (size < sealed_header_size + sealed_tag_size || !read_at(0, sealed_header_size) || !looks_sealed(buf))
    return make_error(errc::corruption, path + ": not a sealed object (no LOOMSEAL header, or shorter than one)");
  const std::string header = buf;
  std::size_t at = sealed_header_size;
  return unseal_walk(
      u(header), size - sealed_header_size, keys, path, [](std::size_t) { return ok_status(); },
      [&](std::size_t, std::size_t n) -> const unsigned char* {
        if (!read_at(at, n + sealed_tag_size)) return nullptr;
        at += n + sealed_tag_size;
        return u(buf);
      },
      [&](std::size_t, std::size_t n) {
        plain.resize(n);
        return reinterpret_cast<unsigned char*>(plain.data());
      },
      [&](std::size_t, std::size_t n) { return sink(std::string_view(plain.data(), n)); }, &read_error);
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
