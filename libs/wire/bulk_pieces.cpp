#include "libs/wire/bulk_pieces.hpp"

#include "libs/files/files.hpp"
#include "libs/wire/bulk_types.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace loom::wire {
namespace {

constexpr std::string_view magic = "LOOMBPC1";

void put32(char* p, std::uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v & 0xff);
}
std::uint32_t get32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Fills `n` bytes at `offset`; corruption naming `path` when the file ends first.
status pread_exact(int fd, char* buf, std::size_t n, std::uint64_t offset, const std::string& path) {
  while (n > 0) {
    ssize_t got = ::pread(fd, buf, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return files::errno_error("read", path);
    if (got == 0) return make_error(errc::corruption, path + ": ends early at byte " + std::to_string(offset));
    buf += got;
    n -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
  return {};
}

}  // namespace

result<pieces_file> read_pieces_layout(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return files::errno_error("stat", path);
  char head[pieces_header_bytes];
  if (static_cast<std::uint64_t>(st.st_size) < pieces_header_bytes)
    return make_error(errc::corruption, path + ": too short for a sealed-pieces header");
  if (auto s = pread_exact(fd, head, sizeof head, 0, path); !s.ok()) return s.err();
  auto l = parse_pieces_header(std::string_view(head, sizeof head), path);
  if (!l.ok()) return l.err();
  auto plain = l->plain_bytes(static_cast<std::uint64_t>(st.st_size));
  if (!plain)
    return make_error(errc::corruption, path + ": " + std::to_string(st.st_size) +
                                            " bytes cannot hold whole sealed pieces (cut short or grown)");
  return pieces_file{*l, *plain};
}

std::uint64_t pieces_layout::file_bytes(std::uint64_t plain) const {
  const std::uint64_t count = chunk_count_for(plain, piece_bytes);
  return pieces_header_bytes + plain + count * overhead;
}

std::optional<std::uint64_t> pieces_layout::plain_bytes(std::uint64_t file) const {
  if (file < pieces_header_bytes || piece_bytes == 0) return std::nullopt;
  const std::uint64_t body = file - pieces_header_bytes, full = body / record_bytes(), rest = body % record_bytes();
  if (rest == 0) return full * piece_bytes;
  if (rest <= overhead) return std::nullopt;  // a last record with no plaintext
  return full * piece_bytes + (rest - overhead);
}

std::string pieces_layout::header() const {
  std::string h(pieces_header_bytes, '\0');
  std::memcpy(h.data(), magic.data(), magic.size());
  put32(h.data() + 8, piece_bytes);
  put32(h.data() + 12, overhead);
  return h;
}

result<pieces_layout> parse_pieces_header(std::string_view head, const std::string& what) {
  if (head.size() < pieces_header_bytes || head.substr(0, magic.size()) != magic)
    return make_error(errc::corruption, what + ": not a sealed-pieces file (bad magic)");
  pieces_layout l{get32(head.data() + 8), get32(head.data() + 12)};
  if (l.piece_bytes == 0 || l.piece_bytes > max_chunk_bytes)
    return make_error(errc::corruption, what + ": piece size " + std::to_string(l.piece_bytes) + " not in 1..64 MiB");
  if (l.overhead > 4096)
    return make_error(errc::corruption, what + ": record overhead " + std::to_string(l.overhead) + " is implausible");
  return l;
}

status read_piece(int fd, const std::string& path, const pieces_layout& l, const bulk_piece_codec& codec,
                  std::uint64_t index, std::size_t length, std::string& scratch, std::string& out) {
  scratch.resize(length + l.overhead);
  if (auto s = pread_exact(fd, scratch.data(), scratch.size(), l.offset(index), path); !s.ok()) return s;
  return codec.open(scratch, index, path, out);
}

status read_pieces_fd(int fd, const std::string& path, const bulk_piece_codec& codec,
                      const std::function<status(std::string_view)>& sink) {
  auto lp = read_pieces_layout(fd, path);
  if (!lp.ok()) return lp.err();
  const pieces_layout& l = lp->layout;
  const std::uint64_t plain = lp->plain_bytes;
  if (l.overhead != codec.overhead())
    return make_error(errc::corruption, path + ": sealed with another codec (record overhead " +
                                            std::to_string(l.overhead) + ", expected " +
                                            std::to_string(codec.overhead()) + ")");
  std::string scratch, piece;
  for (std::uint64_t i = 0, at = 0; at < plain; ++i, at += l.piece_bytes) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(l.piece_bytes, plain - at));
    if (auto s = read_piece(fd, path, l, codec, i, n, scratch, piece); !s.ok()) return s;
    if (piece.size() != n)
      return make_error(errc::corruption, path + ": piece " + std::to_string(i) + " holds " +
                                              std::to_string(piece.size()) + " bytes, expected " + std::to_string(n));
    if (auto s = sink(piece); !s.ok()) return s;
  }
  return {};
}

status read_pieces(const std::string& path, const bulk_piece_codec& codec,
                   const std::function<status(std::string_view)>& sink) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  auto s = read_pieces_fd(fd, path, codec, sink);
  ::close(fd);
  return s;
}

result<std::uint64_t> pieces_plain_size(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  auto lp = read_pieces_layout(fd, path);
  ::close(fd);
  if (!lp.ok()) return lp.err();
  return lp->plain_bytes;
}

pieces_writer::pieces_writer(int fd, std::string path, pieces_layout l, const bulk_piece_codec& codec)
    : fd_(fd), path_(std::move(path)), layout_(l), codec_(&codec) {}

pieces_writer::pieces_writer(pieces_writer&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      path_(std::move(o.path_)),
      layout_(o.layout_),
      codec_(o.codec_),
      piece_(std::move(o.piece_)),
      sealed_(std::move(o.sealed_)),
      index_(o.index_),
      plain_(o.plain_) {}

pieces_writer::~pieces_writer() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
}

result<pieces_writer> pieces_writer::create(const std::string& path, std::uint32_t piece_bytes,
                                            const bulk_piece_codec& codec) {
  if (piece_bytes == 0 || piece_bytes > max_chunk_bytes)
    return make_error(errc::invalid_argument, "piece size " + std::to_string(piece_bytes) + " not in 1..64 MiB");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return files::errno_error("create", path);
  pieces_writer w(fd, path, pieces_layout{piece_bytes, static_cast<std::uint32_t>(codec.overhead())}, codec);
  if (auto s = files::write_all(fd, w.layout_.header(), path); !s.ok()) return s.err();
  w.piece_.reserve(piece_bytes);
  return w;
}

status pieces_writer::flush_piece() {
  if (auto s = codec_->seal(piece_, index_, sealed_); !s.ok()) return s;
  if (sealed_.size() != piece_.size() + layout_.overhead)
    return make_error(errc::internal, path_ + ": the codec sealed a piece to an unexpected size");
  if (auto s = files::write_all(fd_, sealed_, path_); !s.ok()) return s;
  ++index_;
  piece_.clear();
  return {};
}

status pieces_writer::append(std::string_view plain) {
  if (fd_ < 0) return make_error(errc::internal, path_ + ": append after finish");
  while (!plain.empty()) {
    const std::size_t take = std::min<std::size_t>(plain.size(), layout_.piece_bytes - piece_.size());
    piece_.append(plain.substr(0, take));
    plain.remove_prefix(take);
    plain_ += take;
    if (piece_.size() == layout_.piece_bytes)
      if (auto s = flush_piece(); !s.ok()) return s;
  }
  return {};
}

result<std::uint64_t> pieces_writer::finish() {
  if (fd_ < 0) return make_error(errc::internal, path_ + ": finished twice");
  if (!piece_.empty())
    if (auto s = flush_piece(); !s.ok()) return s.err();
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    auto e = files::errno_error("close", path_);
    ::unlink(path_.c_str());
    return e;
  }
  return plain_;
}

}  // namespace loom::wire
