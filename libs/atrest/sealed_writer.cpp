// sealed_writer (sealed.hpp): a sealed file written as its plaintext arrives.
#include "libs/atrest/sealed.hpp"

#include "libs/atrest/seal_format.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"

#include <openssl/crypto.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

namespace loom::atrest {

struct sealed_writer::impl {
  std::string path, tmp;
  int fd = -1;
  std::uint32_t chunk = default_chunk;
  detail::cipher_ctx ctx = detail::new_ctx();
  unsigned char header[sealed_header_size] = {};
  key256 dek{};
  crypto::sha256_stream hash;
  std::string pending;  // plaintext of the chunk not yet known not to be the last
  std::string out;      // one sealed chunk and its tag
  std::size_t index = 0;
  std::uint64_t bytes = 0;
  bool failed = false, done = false;

  ~impl() {
    OPENSSL_cleanse(dek.data(), dek.size());
    if (!pending.empty()) OPENSSL_cleanse(pending.data(), pending.size());
    if (fd >= 0) ::close(fd);
    if (!done && !tmp.empty()) ::unlink(tmp.c_str());
  }

  error fail(error e) {
    failed = true;
    return e;
  }

  // Seals chunk `index` from `n` bytes at `in` and writes it.
  status put(const char* in, std::size_t n, bool last) {
    out.resize(n + sealed_tag_size);
    if (!detail::seal_chunk(ctx.get(), dek, header, index, last, reinterpret_cast<const unsigned char*>(in), n,
                            reinterpret_cast<unsigned char*>(out.data())))
      return fail(make_error(errc::internal, "AES-256-GCM failed sealing " + tmp));
    if (auto st = files::write_all(fd, out, tmp); !st) return fail(st.err());
    ++index;
    return ok_status();
  }
};

sealed_writer::sealed_writer(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
sealed_writer::~sealed_writer() = default;

result<std::unique_ptr<sealed_writer>> sealed_writer::create(const std::string& path, kek_store& keys, sys_time now,
                                                              mode_t mode, std::uint32_t chunk) {
  auto i = std::make_unique<impl>();
  i->path = path;
  i->chunk = chunk;
  if (auto st = detail::begin_object(keys, now, chunk, i->ctx.get(), i->header, i->dek); !st) return st.err();
  // Unique per process and call, as files::write_atomic names its temporaries.
  static std::atomic<std::uint64_t> calls{0};
  i->tmp = path + ".tmp." + std::to_string(::getpid()) + ".s" + std::to_string(calls++);
  i->fd = ::open(i->tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (i->fd < 0) {
    auto e = files::errno_error("create", i->tmp);
    i->tmp.clear();
    return e;
  }
  ::fchmod(i->fd, files::masked_mode(mode));
  if (auto st = files::write_all(i->fd, std::string_view(reinterpret_cast<const char*>(i->header), sealed_header_size),
                                 i->tmp);
      !st)
    return st.err();
  i->pending.reserve(chunk);
  return std::unique_ptr<sealed_writer>(new sealed_writer(std::move(i)));
}

status sealed_writer::append(std::string_view plain) {
  impl& w = *impl_;
  if (w.failed || w.done) return make_error(errc::invalid_argument, "sealed_writer::append after an error or finish: " + w.path);
  w.hash.update(plain);
  w.bytes += plain.size();
  while (!plain.empty()) {
    if (w.pending.size() == w.chunk) {  // more follows: the held chunk is not the last
      if (auto st = w.put(w.pending.data(), w.chunk, false); !st) return st;
      w.pending.clear();
    }
    // A whole chunk with more after it goes straight from the caller's bytes.
    if (w.pending.empty() && plain.size() > w.chunk) {
      if (auto st = w.put(plain.data(), w.chunk, false); !st) return st;
      plain.remove_prefix(w.chunk);
      continue;
    }
    const std::size_t take = std::min<std::size_t>(w.chunk - w.pending.size(), plain.size());
    w.pending.append(plain.data(), take);
    plain.remove_prefix(take);
  }
  return ok_status();
}

result<sealed_writer::facts> sealed_writer::finish() {
  impl& w = *impl_;
  if (w.failed || w.done) return make_error(errc::invalid_argument, "sealed_writer::finish after an error or finish: " + w.path);
  if (auto st = w.put(w.pending.data(), w.pending.size(), true); !st) return st.err();
  OPENSSL_cleanse(w.pending.data(), w.pending.size());
  w.pending.clear();
  if (files::fsync_fd(w.fd) != 0) return w.fail(files::errno_error("fsync", w.tmp));
  const int fd = w.fd;
  w.fd = -1;
  if (::close(fd) != 0) return w.fail(files::errno_error("close", w.tmp));
  if (::rename(w.tmp.c_str(), w.path.c_str()) != 0) return w.fail(files::errno_error("rename to", w.path));
  w.done = true;
  const std::filesystem::path p(w.path);
  if (auto st = files::fsync_dir(p.has_parent_path() ? p.parent_path().string() : "."); !st) return st.err();
  const auto d = w.hash.finish();
  return facts{crypto::to_hex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size())), w.bytes};
}

}  // namespace loom::atrest
