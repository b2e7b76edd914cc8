#include "libs/wire/bulk_receiver.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::wire {
namespace {

// File-system names are at most 255 bytes; leave room for ".part.state.tmp.<pid>".
constexpr std::size_t max_name_bytes = 200;
constexpr std::string_view state_magic = "loom-bulk-part 1";

// What <name>.part.state records: the object's identity and the verified chunks.
struct part_state {
  std::uint64_t total_bytes = 0;
  std::uint32_t chunk_bytes = 0;
  std::uint32_t chunk_count = 0;
  crypto::digest sha256{};
  std::string verified;  // one '0'/'1' per chunk
};

std::string encode_state(const part_state& s) {
  std::ostringstream o;
  o << state_magic << "\ntotal_bytes " << s.total_bytes << "\nchunk_bytes " << s.chunk_bytes
    << "\nchunk_count " << s.chunk_count << "\nsha256 " << crypto::to_hex(crypto::as_view(s.sha256))
    << "\nverified " << s.verified << "\n";
  return o.str();
}

// nullopt for anything malformed: a damaged state only costs a fresh start.
std::optional<part_state> decode_state(const std::string& text) {
  std::istringstream in(text);
  std::string magic, k1, k2, k3, k4, k5, hex;
  part_state s;
  if (!std::getline(in, magic) || magic != state_magic) return std::nullopt;
  if (!(in >> k1 >> s.total_bytes >> k2 >> s.chunk_bytes >> k3 >> s.chunk_count >> k4 >> hex >> k5))
    return std::nullopt;
  if (k1 != "total_bytes" || k2 != "chunk_bytes" || k3 != "chunk_count" || k4 != "sha256" ||
      k5 != "verified")
    return std::nullopt;
  if (s.chunk_count > 0 && !(in >> s.verified)) return std::nullopt;
  auto raw = crypto::from_hex(hex);
  if (!raw.ok() || raw->size() != s.sha256.size()) return std::nullopt;
  std::memcpy(s.sha256.data(), raw->data(), s.sha256.size());
  if (s.verified.size() != s.chunk_count ||
      s.verified.find_first_not_of("01") != std::string::npos)
    return std::nullopt;
  return s;
}

result<crypto::digest> hash_fd(int fd, std::uint64_t size, const std::string& path) {
  crypto::sha256_stream h;
  std::string buf(1u << 20, '\0');
  for (std::uint64_t off = 0; off < size;) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size - off));
    ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return files::errno_error("read", path);
    if (n == 0) return make_error(errc::corruption, "short file " + path);
    h.update(buf.data(), static_cast<std::size_t>(n));
    off += static_cast<std::uint64_t>(n);
  }
  return h.finish();
}

// The SHA-256 of the object's plaintext in the sealed-pieces file open as
// `fd`; corruption when it holds another size or a piece fails to open.
result<crypto::digest> hash_object(int fd, const bulk_offer& o, const bulk_piece_codec* codec, const std::string& path) {
  if (!codec) return hash_fd(fd, o.total_bytes, path);
  crypto::sha256_stream h;
  std::uint64_t seen = 0;
  auto s = read_pieces_fd(fd, path, *codec, [&](std::string_view piece) -> status {
    h.update(piece.data(), piece.size());
    seen += piece.size();
    return {};
  });
  if (!s.ok()) return s.err();
  if (seen != o.total_bytes)
    return make_error(errc::corruption, path + ": holds " + std::to_string(seen) + " bytes, expected " +
                                            std::to_string(o.total_bytes));
  return h.finish();
}

// True when dest/<name> already holds exactly the offered object (sealed
// the same way when `codec` is given).
bool final_matches(const std::string& path, const bulk_offer& o, const bulk_piece_codec* codec) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool same = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
              (codec || static_cast<std::uint64_t>(st.st_size) == o.total_bytes);
  if (same) {
    auto d = hash_object(fd, o, codec, path);
    same = d.ok() && *d == o.sha256;
  }
  ::close(fd);
  return same;
}

// Whether the file at `path` starts with `header`.
bool part_header_is(const std::string& path, const std::string& header) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  std::string head(header.size(), '\0');
  const bool same = ::pread(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()) && head == header;
  ::close(fd);
  return same;
}

status check_offer(const bulk_offer& o) {
  if (auto s = validate_bulk_name(o.name); !s.ok()) return s;
  if (o.transfer_id.empty() || o.transfer_id.size() > max_transfer_id_bytes)
    return make_error(errc::invalid_argument, "bulk offer: transfer id must be 1..64 bytes");
  if (o.chunk_bytes == 0 || o.chunk_bytes > max_chunk_bytes)
    return make_error(errc::invalid_argument,
                      "bulk offer: chunk_bytes " + std::to_string(o.chunk_bytes) + " not in 1..64 MiB");
  if (chunk_count_for(o.total_bytes, o.chunk_bytes) != o.chunk_count)
    return make_error(errc::invalid_argument, "bulk offer: chunk_count " + std::to_string(o.chunk_count) +
                                                  " does not match total_bytes/chunk_bytes");
  return {};
}

bulk_ack bad_ack(const bulk_chunk_header& h, errc code, std::string reason, bool fatal = false) {
  return bulk_ack{h.transfer_id, h.index, false, code, std::move(reason), fatal, false};
}

}  // namespace

status validate_bulk_name(std::string_view name) {
  auto bad = [&](const char* why) {
    return make_error(errc::invalid_argument, "bulk name \"" + std::string(name.substr(0, 64)) + "\": " + why);
  };
  if (name.empty()) return bad("empty");
  if (name.size() > max_name_bytes) return bad("longer than 200 bytes");
  if (name.find('/') != std::string_view::npos) return bad("contains '/'");
  if (name.find('\0') != std::string_view::npos) return bad("contains NUL");
  if (name.find("..") != std::string_view::npos) return bad("contains \"..\"");
  if (name == ".") return bad("is \".\"");
  if (name.ends_with(".part") || name.find(".part.state") != std::string_view::npos)
    return bad("uses a suffix reserved for partial transfers");
  return {};
}

struct bulk_receiver::transfer {
  bulk_offer offer;
  part_state state;
  std::uint32_t remaining = 0;  // chunks not yet verified
  int fd = -1;
  std::string part_path, state_path, final_path;
  std::uint64_t last_used = 0;
  pieces_layout layout;  // with a codec: where chunk i's record lies
  std::string sealed;    // with a codec: the record being written

  ~transfer() {
    if (fd >= 0) ::close(fd);
  }
};

bulk_receiver::bulk_receiver(std::string dest_dir, std::shared_ptr<const bulk_piece_codec> codec)
    : dest_dir_(std::move(dest_dir)), codec_(std::move(codec)) {}
bulk_receiver::~bulk_receiver() = default;

void bulk_receiver::forget(const std::string& transfer_id) { open_.erase(transfer_id); }

result<bulk_need> bulk_receiver::on_offer(const bulk_offer& o) {
  if (auto s = check_offer(o); !s.ok()) return s.err();
  // A re-offer under the same id (a retried request) is answered from memory.
  if (auto it = open_.find(o.transfer_id); it != open_.end()) {
    const bulk_offer& cur = it->second->offer;
    if (cur.name == o.name && cur.total_bytes == o.total_bytes && cur.chunk_bytes == o.chunk_bytes &&
        cur.sha256 == o.sha256) {
      bulk_need need{o.transfer_id, {}, false};
      for (std::uint32_t i = 0; i < o.chunk_count; ++i)
        if (it->second->state.verified[i] == '0') need.missing.push_back(i);
      it->second->last_used = ++tick_;
      return need;
    }
    forget(o.transfer_id);
  }
  for (auto it = open_.begin(); it != open_.end();)  // one transfer per name
    it = it->second->offer.name == o.name ? open_.erase(it) : std::next(it);
  if (open_.size() >= max_open_transfers) {
    auto lru = std::min_element(open_.begin(), open_.end(), [](const auto& a, const auto& b) {
      return a.second->last_used < b.second->last_used;
    });
    open_.erase(lru);
  }
  if (auto s = files::make_dirs(dest_dir_); !s.ok()) return s.err();

  auto t = std::make_unique<transfer>();
  t->offer = o;
  t->final_path = dest_dir_ + "/" + o.name;
  t->part_path = t->final_path + ".part";
  t->state_path = t->part_path + ".state";
  t->last_used = ++tick_;

  // Resume only a partial of the very same object; anything else is discarded.
  std::optional<part_state> prior;
  if (auto text = files::read_file(t->state_path); text.ok()) prior = decode_state(*text);
  if (codec_) t->layout = pieces_layout{o.chunk_bytes, static_cast<std::uint32_t>(codec_->overhead())};
  const std::uint64_t file_bytes = codec_ ? t->layout.file_bytes(o.total_bytes) : o.total_bytes;
  struct stat st {};
  bool resumable = prior && prior->total_bytes == o.total_bytes && prior->chunk_bytes == o.chunk_bytes &&
                   prior->chunk_count == o.chunk_count && prior->sha256 == o.sha256 &&
                   ::lstat(t->part_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                   static_cast<std::uint64_t>(st.st_size) == file_bytes;
  if (resumable && codec_) {  // and sealed the same way (a plain partial of that size is not)
    resumable = part_header_is(t->part_path, t->layout.header());
  }
  if (!resumable) {
    ::unlink(t->state_path.c_str());
    ::unlink(t->part_path.c_str());
    if (final_matches(t->final_path, o, codec_.get())) return bulk_need{o.transfer_id, {}, true};
    prior = part_state{o.total_bytes, o.chunk_bytes, o.chunk_count, o.sha256, std::string(o.chunk_count, '0')};
  }
  t->state = std::move(*prior);
  t->remaining = static_cast<std::uint32_t>(std::count(t->state.verified.begin(), t->state.verified.end(), '0'));

  // O_NOFOLLOW: a planted symlink must not redirect writes outside dest_dir.
  t->fd = ::open(t->part_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (t->fd < 0) return files::errno_error("open", t->part_path);
  if (!resumable) {
    status s = ::ftruncate(t->fd, static_cast<off_t>(file_bytes)) == 0
                   ? status{}
                   : status(files::errno_error("size", t->part_path));
    if (s.ok() && codec_) s = files::pwrite_all(t->fd, t->layout.header(), 0, t->part_path);
    if (!s.ok()) {
      ::unlink(t->part_path.c_str());
      return s.err();
    }
  }

  bulk_need need{o.transfer_id, {}, false};
  for (std::uint32_t i = 0; i < o.chunk_count; ++i)
    if (t->state.verified[i] == '0') need.missing.push_back(i);
  if (t->remaining == 0) {  // everything verified before a crash: just finish
    auto ack = finish(*t, bulk_ack{o.transfer_id, 0, true, errc::ok, {}, false, false});
    if (!ack.ok) return make_error(ack.code, ack.reason);
    need.complete = true;
    return need;
  }
  open_.emplace(o.transfer_id, std::move(t));
  return need;
}

bulk_ack bulk_receiver::on_chunk(const bulk_chunk_header& h, std::string_view data) {
  auto it = open_.find(h.transfer_id);
  if (it == open_.end()) return bad_ack(h, errc::not_found, "unknown transfer", true);
  transfer& t = *it->second;
  t.last_used = ++tick_;
  const bulk_offer& o = t.offer;
  if (h.index >= o.chunk_count)
    return bad_ack(h, errc::invalid_argument,
                   "index " + std::to_string(h.index) + " out of range (" + std::to_string(o.chunk_count) + " chunks)");
  std::uint64_t offset = std::uint64_t{h.index} * o.chunk_bytes;
  if (h.offset != offset)
    return bad_ack(h, errc::invalid_argument,
                   "offset mismatch: " + std::to_string(h.offset) + ", expected " + std::to_string(offset));
  std::uint64_t size = std::min<std::uint64_t>(o.chunk_bytes, o.total_bytes - offset);
  if (data.size() != size)
    return bad_ack(h, errc::invalid_argument,
                   "wrong size: " + std::to_string(data.size()) + " bytes, expected " + std::to_string(size));
  if (crypto::sha256(data) != h.sha256) return bad_ack(h, errc::corruption, "sha256 mismatch");
  bulk_ack ack{h.transfer_id, h.index, true, errc::ok, {}, false, false};
  if (t.state.verified[h.index] == '1') return ack;  // a duplicate re-send

  // Data durable before the state says so; a crash in between only re-asks the chunk.
  status s;
  if (codec_) {
    s = codec_->seal(data, h.index, t.sealed);
    if (s.ok()) s = files::pwrite_all(t.fd, t.sealed, t.layout.offset(h.index), t.part_path);
  } else {
    s = files::pwrite_all(t.fd, data, offset, t.part_path);
  }
  if (s.ok() && files::fdatasync_fd(t.fd) != 0) s = files::errno_error("fdatasync", t.part_path);
  if (s.ok()) {
    t.state.verified[h.index] = '1';
    s = files::write_atomic(t.state_path, encode_state(t.state));
  }
  if (!s.ok()) {
    auto bad = bad_ack(h, s.code(), s.err().message, true);
    forget(h.transfer_id);  // the partial stays; a new offer resumes from the state on disk
    return bad;
  }
  if (--t.remaining > 0) return ack;
  ack = finish(t, std::move(ack));
  forget(h.transfer_id);
  return ack;
}

// All chunks verified: check the whole object, then publish it under its name.
bulk_ack bulk_receiver::finish(transfer& t, bulk_ack ack) {
  auto fail = [&](const error& e) {
    ack.ok = false;
    ack.fatal = true;
    ack.code = e.code;
    ack.reason = e.message;
    return ack;
  };
  if (files::fsync_fd(t.fd) != 0) return fail(files::errno_error("fsync", t.part_path));
  auto d = hash_object(t.fd, t.offer, codec_.get(), t.part_path);
  if (!d.ok() && d.code() != errc::corruption) return fail(d.err());
  if (!d.ok() || *d != t.offer.sha256) {  // a bad partial is never resumed
    ::unlink(t.part_path.c_str());
    ::unlink(t.state_path.c_str());
    (void)files::fsync_dir(dest_dir_);
    return fail(make_error(errc::corruption, (d.ok() ? "whole-object sha256 mismatch for \"" + t.offer.name + "\""
                                                     : d.err().message) +
                                                 "; partial discarded"));
  }
  if (::rename(t.part_path.c_str(), t.final_path.c_str()) != 0)
    return fail(files::errno_error("rename to", t.final_path));
  // A state left behind by a crash here is harmless: without its .part it is discarded.
  ::unlink(t.state_path.c_str());
  if (auto s = files::fsync_dir(dest_dir_); !s.ok()) return fail(s.err());
  ack.complete = true;
  return ack;
}

}  // namespace loom::wire
