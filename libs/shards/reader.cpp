#include "libs/shards/reader.hpp"

#include "libs/atrest/object.hpp"
#include "libs/crypto/hash.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace loom::shards {
namespace {

template <class T>
T get(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

shard_reader::shard_reader(shard_reader&& o) noexcept { *this = std::move(o); }

shard_reader& shard_reader::operator=(shard_reader&& o) noexcept {
  if (this != &o) {
    if (base_ && !plain_) ::munmap(const_cast<unsigned char*>(base_), size_);
    path_ = std::move(o.path_);
    plain_ = std::move(o.plain_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
    type_ = o.type_;
    tokens_ = o.tokens_;
    docs_ = o.docs_;
    index_offset_ = o.index_offset_;
  }
  return *this;
}

shard_reader::~shard_reader() {
  if (base_ && !plain_) ::munmap(const_cast<unsigned char*>(base_), size_);
}

result<shard_reader> shard_reader::open(const std::string& path, std::string_view expected_sha,
                                       atrest::kek_store* keys) {
  auto bad = [&](const std::string& what) { return make_error(errc::corruption, path + ": " + what); };
  if (atrest::is_sealed_file(path)) {
    // Sealed at rest: unsealed (every chunk's tag verified) into memory the
    // reader owns, then validated exactly as a mapped file.
    shard_reader r;
    r.path_ = path;
    r.plain_ = std::make_unique<std::string>();
    std::string scratch;
    if (auto st = atrest::read_object_into(path, scratch, *r.plain_, keys); !st) return st.err();
    if (r.plain_->size() < header_bytes)
      return bad("truncated: " + std::to_string(r.plain_->size()) + " bytes unsealed, a header needs " +
                 std::to_string(header_bytes));
    r.base_ = reinterpret_cast<const unsigned char*>(r.plain_->data());
    r.size_ = r.plain_->size();
    if (auto st = r.validate(expected_sha); !st) return st.err();
    return r;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return make_error(e == ENOENT ? errc::not_found : errc::unavailable,
                      path + ": open: " + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(errc::unavailable, path + ": fstat: " + std::strerror(e));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < header_bytes) {
    ::close(fd);
    return bad("truncated: " + std::to_string(size) + " bytes, a header needs " +
               std::to_string(header_bytes));
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED) return make_error(errc::unavailable, path + ": mmap: " + std::strerror(map_errno));

  shard_reader r;  // owns the mapping from here on, so every early return unmaps
  r.path_ = path;
  r.base_ = static_cast<const unsigned char*>(map);
  r.size_ = size;
  if (auto st = r.validate(expected_sha); !st) return st.err();
  return r;
}

status shard_reader::validate(std::string_view expected_sha) {
  shard_reader& r = *this;
  const std::string& path = path_;
  const std::uint64_t size = size_;
  auto bad = [&](const std::string& what) { return make_error(errc::corruption, path + ": " + what); };
  const unsigned char* p = r.base_;

  if (std::memcmp(p, magic.data(), magic.size()) != 0) return bad("bad magic");
  if (auto v = get<std::uint32_t>(p + 8); v != format_version)
    return bad("unsupported version " + std::to_string(v) + " (reader knows " +
               std::to_string(format_version) + ")");
  const auto t = get<std::uint32_t>(p + 12);
  if (t != static_cast<std::uint32_t>(dtype::uint16) && t != static_cast<std::uint32_t>(dtype::uint32))
    return bad("unknown dtype " + std::to_string(t));
  r.type_ = static_cast<dtype>(t);
  r.tokens_ = get<std::uint64_t>(p + 16);
  r.docs_ = get<std::uint64_t>(p + 24);
  const auto tokens_offset = get<std::uint64_t>(p + 32);
  r.index_offset_ = get<std::uint64_t>(p + 40);
  const auto file_size = get<std::uint64_t>(p + 48);

  if (tokens_offset != header_bytes)
    return bad("tokens offset " + std::to_string(tokens_offset) + ", expected 64");
  // Bounding the counts by the real size first keeps the arithmetic below from overflowing.
  if (r.tokens_ > size || r.docs_ > size)
    return bad("header says " + std::to_string(r.tokens_) + " tokens and " +
               std::to_string(r.docs_) + " documents but the file has " + std::to_string(size) +
               " bytes");
  const std::uint64_t want_index = header_bytes + r.tokens_ * width(r.type_);
  if (r.index_offset_ != want_index)
    return bad("index offset " + std::to_string(r.index_offset_) + " but " +
               std::to_string(r.tokens_) + " tokens put it at " + std::to_string(want_index));
  const std::uint64_t want_size = want_index + r.docs_ * 8;
  if (file_size != want_size)
    return bad("header file_size " + std::to_string(file_size) + " but its counts give " +
               std::to_string(want_size));
  if (size != file_size)
    return bad("size " + std::to_string(size) + " but header says " + std::to_string(file_size));

  if (r.tokens_ > 0 && r.docs_ == 0) return bad(std::to_string(r.tokens_) + " tokens but no documents");
  std::uint64_t prev = 0;
  for (std::uint64_t k = 0; k < r.docs_; ++k) {
    const std::uint64_t s = r.doc_start(k);
    if (k == 0 && s != 0) return bad("document 0 starts at " + std::to_string(s) + ", not 0");
    if (s < prev)
      return bad("document index not monotonic: document " + std::to_string(k) + " starts at " +
                 std::to_string(s) + " before " + std::to_string(prev));
    if (s > r.tokens_)
      return bad("document " + std::to_string(k) + " starts at " + std::to_string(s) +
                 ", out of range of " + std::to_string(r.tokens_) + " tokens");
    prev = s;
  }

  if (!expected_sha.empty()) {
    const std::string got = crypto::sha256_hex({reinterpret_cast<const char*>(p), size});
    if (got != lower(expected_sha))
      return bad("sha256 " + got + " does not match manifest " + std::string(expected_sha));
  }
  return ok_status();
}

std::uint64_t shard_reader::doc_start(std::uint64_t k) const {
  if (k >= docs_) return tokens_;
  return get<std::uint64_t>(base_ + index_offset_ + k * 8);
}

result<std::span<const std::uint32_t>> shard_reader::tokens(std::uint64_t first, std::uint64_t n,
                                                            std::span<std::uint32_t> buf) const {
  if (first > tokens_ || n > tokens_ - first)
    return make_error(errc::invalid_argument, path_ + ": tokens [" + std::to_string(first) + ", +" +
                                                  std::to_string(n) + ") outside " +
                                                  std::to_string(tokens_) + " tokens");
  if (buf.size() < n)
    return make_error(errc::invalid_argument, path_ + ": buffer of " + std::to_string(buf.size()) +
                                                  " for " + std::to_string(n) + " tokens");
  const unsigned char* src = base_ + header_bytes + first * width(type_);
  if (type_ == dtype::uint32) {
    std::memcpy(buf.data(), src, n * 4);
  } else {
    for (std::uint64_t i = 0; i < n; ++i) buf[i] = get<std::uint16_t>(src + 2 * i);
  }
  return std::span<const std::uint32_t>(buf.data(), n);
}

std::uint64_t shard_reader::document_size(std::uint64_t k) const {
  return doc_start(k + 1) - doc_start(k);
}

result<std::span<const std::uint32_t>> shard_reader::document(std::uint64_t k,
                                                              std::span<std::uint32_t> buf) const {
  if (k >= docs_)
    return make_error(errc::invalid_argument, path_ + ": document " + std::to_string(k) +
                                                  " of " + std::to_string(docs_));
  return tokens(doc_start(k), document_size(k), buf);
}

}  // namespace loom::shards
