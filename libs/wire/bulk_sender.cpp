#include "libs/wire/bulk_sender.hpp"

#include "libs/files/files.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/wire/bulk_receiver.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <algorithm>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace loom::wire {
namespace {

// Fills `buf` from `offset`; corruption when the file ends first.
status pread_all(int fd, char* buf, std::size_t n, std::uint64_t offset, const std::string& path) {
  while (n > 0) {
    ssize_t got = ::pread(fd, buf, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return files::errno_error("read", path);
    if (got == 0) return make_error(errc::corruption, "file " + path + " shrank while being sent");
    buf += got;
    n -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
  return {};
}

}  // namespace

bulk_sender::bulk_sender(int fd, std::string path, bulk_offer offer)
    : fd_(fd), path_(std::move(path)), offer_(std::move(offer)) {}

bulk_sender::bulk_sender(bulk_sender&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      offer_(std::move(other.offer_)),
      codec_(other.codec_),
      layout_(other.layout_) {}

bulk_sender& bulk_sender::operator=(bulk_sender&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    offer_ = std::move(other.offer_);
    codec_ = other.codec_;
    layout_ = other.layout_;
  }
  return *this;
}

bulk_sender::~bulk_sender() {
  if (fd_ >= 0) ::close(fd_);
}

result<bulk_sender> bulk_sender::open(const std::string& path, std::string name, std::uint32_t chunk_bytes,
                                      std::string transfer_id, const bulk_piece_codec* codec) {
  if (auto s = validate_bulk_name(name); !s.ok()) return s.err();
  if (chunk_bytes == 0 || chunk_bytes > max_chunk_bytes)
    return make_error(errc::invalid_argument, "chunk_bytes " + std::to_string(chunk_bytes) + " not in 1..64 MiB");
  if (transfer_id.size() > max_transfer_id_bytes)
    return make_error(errc::invalid_argument, "transfer id longer than 64 bytes");
  if (transfer_id.empty()) transfer_id = crypto::to_hex(crypto::random_bytes(16));

  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  bulk_sender sender(fd, path, {});  // owns fd from here on
  struct stat st {};
  if (::fstat(fd, &st) != 0) return files::errno_error("stat", path);
  if (!S_ISREG(st.st_mode)) return make_error(errc::invalid_argument, path + " is not a regular file");

  bulk_offer& o = sender.offer_;
  o.transfer_id = std::move(transfer_id);
  o.name = std::move(name);
  o.total_bytes = static_cast<std::uint64_t>(st.st_size);
  o.chunk_bytes = chunk_bytes;
  if (codec) {
    auto f = read_pieces_layout(fd, path);
    if (!f.ok()) return f.err();
    if (f->layout.piece_bytes != chunk_bytes)
      return make_error(errc::invalid_argument, path + ": sealed in pieces of " +
                                                    std::to_string(f->layout.piece_bytes) + " bytes, sent in chunks of " +
                                                    std::to_string(chunk_bytes));
    sender.codec_ = codec;
    sender.layout_ = f->layout;
    o.total_bytes = f->plain_bytes;
  }
  std::uint64_t count = chunk_count_for(o.total_bytes, chunk_bytes);
  if (count > std::numeric_limits<std::uint32_t>::max())
    return make_error(errc::invalid_argument, path + ": too many chunks; use a larger chunk size");
  o.chunk_count = static_cast<std::uint32_t>(count);

  crypto::sha256_stream h;
  if (codec) {
    auto s = read_pieces_fd(fd, path, *codec, [&](std::string_view piece) -> status {
      h.update(piece.data(), piece.size());
      return {};
    });
    if (!s.ok()) return s.err();
  } else {
    std::string buf(chunk_bytes, '\0');
    for (std::uint64_t off = 0; off < o.total_bytes; off += chunk_bytes) {
      auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, o.total_bytes - off));
      if (auto s = pread_all(fd, buf.data(), n, off, path); !s.ok()) return s.err();
      h.update(buf.data(), n);
    }
  }
  o.sha256 = h.finish();
  return sender;
}

result<bulk_chunk> bulk_sender::chunk(std::uint32_t index) const {
  if (index >= offer_.chunk_count)
    return make_error(errc::invalid_argument, "chunk " + std::to_string(index) + " out of range (" +
                                                  std::to_string(offer_.chunk_count) + " chunks)");
  bulk_chunk c;
  c.header.transfer_id = offer_.transfer_id;
  c.header.index = index;
  c.header.offset = std::uint64_t{index} * offer_.chunk_bytes;
  auto n = static_cast<std::size_t>(std::min<std::uint64_t>(offer_.chunk_bytes, offer_.total_bytes - c.header.offset));
  if (codec_) {
    std::string scratch;
    if (auto s = read_piece(fd_, path_, layout_, *codec_, index, n, scratch, c.data); !s.ok()) return s.err();
    if (c.data.size() != n) return make_error(errc::corruption, path_ + ": piece " + std::to_string(index) + " has the wrong size");
  } else {
    c.data.resize(n);
    if (auto s = pread_all(fd_, c.data.data(), n, c.header.offset, path_); !s.ok()) return s.err();
  }
  c.header.sha256 = crypto::sha256(c.data);
  return c;
}

}  // namespace loom::wire
