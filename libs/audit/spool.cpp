#include "libs/audit/spool.hpp"

#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <unistd.h>

namespace loom::audit {
namespace {

constexpr std::uint32_t magic = 0x4C535031;  // "LSP1"
constexpr std::size_t header_bytes = 20;     // magic, len, seq, crc
constexpr std::string_view watermark_name = "confirmed";

constexpr std::array<std::uint32_t, 256> crc_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // Castagnoli, reflected
    t[i] = c;
  }
  return t;
}();

std::uint32_t crc_update(std::uint32_t crc, std::string_view data) {
  for (unsigned char b : data) crc = crc_table[(crc ^ b) & 0xff] ^ (crc >> 8);
  return crc;
}

void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out += static_cast<char>(v >> (8 * i) & 0xff);
}
std::uint64_t get_be(std::string_view s, std::size_t off, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | static_cast<unsigned char>(s[off + i]);
  return v;
}

// The checksum covers len and seq (header bytes 4..16) and the record bytes.
std::uint32_t record_crc(std::string_view len_seq, std::string_view bytes) {
  return ~crc_update(crc_update(~0u, len_seq), bytes);
}

void encode(std::string& out, std::uint64_t seq, std::string_view rec) {
  std::size_t start = out.size();
  put_be(out, magic, 4);
  put_be(out, rec.size(), 4);
  put_be(out, seq, 8);
  put_be(out, record_crc(std::string_view(out).substr(start + 4, 12), rec), 4);
  out += rec;
}

struct parsed {
  std::uint64_t seq = 0;
  std::string_view bytes;
  std::size_t size = 0;  // header + bytes
};

// nullptr when a whole valid record starts at `off`, else what is wrong.
const char* parse_at(std::string_view data, std::size_t off, parsed& p) {
  if (data.size() - off < header_bytes) return "short record header";
  if (get_be(data, off, 4) != magic) return "bad record magic";
  std::uint64_t len = get_be(data, off + 4, 4);
  if (len > spool::max_record_bytes) return "impossible record length";
  if (data.size() - off - header_bytes < len) return "record runs past the end of the file";
  p.seq = get_be(data, off + 8, 8);
  p.bytes = data.substr(off + header_bytes, len);
  p.size = header_bytes + len;
  if (record_crc(data.substr(off + 4, 12), p.bytes) != get_be(data, off + 16, 4)) return "checksum mismatch";
  return nullptr;
}

// True when a valid record numbered >= min_seq starts anywhere after `off`:
// then the damage at `off` is not a torn tail but lost data in the middle.
bool valid_record_after(std::string_view data, std::size_t off, std::uint64_t min_seq) {
  parsed p;
  for (std::size_t at = off + 1; at + header_bytes <= data.size(); ++at)
    if (get_be(data, at, 4) == magic && !parse_at(data, at, p) && p.seq >= min_seq) return true;
  return false;
}

std::string segment_name(std::uint64_t first_seq) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "seg-%020llu.log", static_cast<unsigned long long>(first_seq));
  return buf;
}

// The first seq of a segment file name, or 0 for any other file.
std::uint64_t parse_segment_name(std::string_view name) {
  if (name.size() != 28 || !name.starts_with("seg-") || !name.ends_with(".log")) return 0;
  std::uint64_t v = 0;
  auto digits = name.substr(4, 20);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return ec == std::errc() && end == digits.data() + digits.size() ? v : 0;
}

error corrupt(const std::string& path, std::size_t off, std::string_view what) {
  return make_error(errc::corruption, "audit spool segment " + path + ": " + std::string(what) + " at offset " +
                                          std::to_string(off));
}

}  // namespace

result<std::unique_ptr<spool>> spool::open(const std::string& dir, spool_options opt) {
  if (auto s = files::make_dirs(dir, 0700); !s.ok()) return s.err();
  std::unique_ptr<spool> sp(new spool(dir, opt));
  std::string lock_path = dir + "/LOCK";
  sp->lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (sp->lock_fd_ < 0) return files::errno_error("open", lock_path);
  if (::flock(sp->lock_fd_, LOCK_EX | LOCK_NB) != 0)
    return make_error(errc::unavailable, "audit spool " + dir + " is in use by another process (flock " + lock_path + ")");
  if (auto s = sp->scan(); !s.ok()) return s.err();
  if (!sp->segments_.empty()) {
    const std::string& path = sp->segments_.back().path;
    sp->active_fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (sp->active_fd_ < 0) return files::errno_error("open", path);
  }
  return sp;
}

spool::~spool() {
  if (active_fd_ >= 0) ::close(active_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

status spool::scan() {
  std::string wm_path = dir_ + "/" + std::string(watermark_name);
  if (auto wm = files::read_file(wm_path); wm.ok()) {
    std::string_view s = *wm;
    if (s.ends_with('\n')) s.remove_suffix(1);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), confirmed_);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size())
      return make_error(errc::corruption, "audit spool watermark " + wm_path + " does not hold a decimal number");
  } else if (wm.code() != errc::not_found) {
    return wm.err();
  }

  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec))
    if (std::uint64_t first = parse_segment_name(e.path().filename().string()))
      segments_.push_back({e.path().string(), first, first - 1, 0});
  if (ec) return make_error(errc::internal, "list audit spool " + dir_ + ": " + ec.message());
  std::sort(segments_.begin(), segments_.end(), [](auto& a, auto& b) { return a.first_seq < b.first_seq; });

  for (std::size_t i = 0; i < segments_.size(); ++i) {
    segment& seg = segments_[i];
    std::uint64_t want_first = i == 0 ? seg.first_seq : segments_[i - 1].last_seq + 1;
    if (i == 0 && seg.first_seq > confirmed_ + 1)
      return corrupt(seg.path, 0, "records " + std::to_string(confirmed_ + 1) + ".." + std::to_string(seg.first_seq - 1) +
                                      " are missing (confirmed through " + std::to_string(confirmed_) + ")");
    if (seg.first_seq != want_first)
      return corrupt(seg.path, 0, "segment should start at seq " + std::to_string(want_first));
    auto data = files::read_file(seg.path);
    if (!data.ok()) return data.err();
    std::string_view d = *data;
    std::size_t off = 0;
    std::uint64_t next = seg.first_seq;
    parsed p;
    while (off < d.size()) {
      const char* bad = parse_at(d, off, p);
      if (!bad && p.seq == next) {
        off += p.size;
        ++next;
        continue;
      }
      bool last = i + 1 == segments_.size();
      if (!bad) return corrupt(seg.path, off, "record has seq " + std::to_string(p.seq) + ", expected " + std::to_string(next));
      if (!last || valid_record_after(d, off, next)) return corrupt(seg.path, off, bad);
      // A torn tail: the record being written when the process died. It was
      // never acknowledged, so dropping it loses nothing anyone was promised.
      std::fprintf(stderr, "warning: audit spool segment %s: dropping torn tail at offset %zu (%zu bytes, %s)\n",
                   seg.path.c_str(), off, d.size() - off, bad);
      int fd = ::open(seg.path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return files::errno_error("open", seg.path);
      const bool ok = ::ftruncate(fd, static_cast<off_t>(off)) == 0 && files::fsync_fd(fd) == 0;
      const int why = errno;  // before close() can change it
      ::close(fd);
      if (!ok) return files::errno_error("truncate torn tail of", seg.path, why);
      break;
    }
    seg.bytes = off;
    seg.last_seq = next - 1;
  }
  last_seq_ = segments_.empty() ? confirmed_ : segments_.back().last_seq;
  if (last_seq_ < confirmed_)
    return corrupt(segments_.back().path, segments_.back().bytes,
                   "spool ends at seq " + std::to_string(last_seq_) + " but seq " + std::to_string(confirmed_) +
                       " was confirmed");
  return {};
}

status spool::start_segment() {
  if (active_fd_ >= 0) ::close(active_fd_);
  active_fd_ = -1;
  std::string path = dir_ + "/" + segment_name(last_seq_ + 1);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return files::errno_error("create", path);
  if (auto s = files::fsync_dir(dir_); !s.ok()) {
    ::close(fd);
    ::unlink(path.c_str());
    return s;
  }
  segments_.push_back({path, last_seq_ + 1, last_seq_, 0});
  active_fd_ = fd;
  return {};
}

status spool::cut_back() {
  if (active_fd_ < 0 || segments_.empty()) {
    broken_ = false;  // no segment open: the next append starts a fresh one
    return {};
  }
  const segment& seg = segments_.back();
  if (::ftruncate(active_fd_, static_cast<off_t>(seg.bytes)) != 0) return files::errno_error("truncate", seg.path);
  if (files::fdatasync_fd(active_fd_) != 0) return files::errno_error("fdatasync", seg.path);
  broken_ = false;
  return {};
}

result<std::uint64_t> spool::append(std::string_view record) {
  std::string one(record);
  return append_batch(std::span<const std::string>(&one, 1));
}

result<std::uint64_t> spool::append_batch(std::span<const std::string> records) {
  if (records.empty()) return make_error(errc::invalid_argument, "append_batch of no records");
  if (broken_)
    if (auto s = cut_back(); !s.ok())
      return make_error(errc::unavailable, "audit spool " + dir_ + " refuses appends until the batch whose sync failed "
                                           "is cut off again: " + s.err().message);
  std::string buf;
  std::uint64_t first = last_seq_ + 1;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].size() > max_record_bytes)
      return make_error(errc::invalid_argument, "audit record of " + std::to_string(records[i].size()) +
                                                    " bytes is over the spool limit of " +
                                                    std::to_string(max_record_bytes));
    encode(buf, first + i, records[i]);
  }
  if (active_fd_ < 0 || (segments_.back().bytes > 0 && segments_.back().bytes + buf.size() > opt_.segment_bytes))
    if (auto s = start_segment(); !s.ok()) return s.err();
  segment& seg = segments_.back();
  if (auto s = files::write_all(active_fd_, buf, seg.path); !s.ok()) {
    // Cut the partial batch off so the next append does not follow garbage.
    broken_ = true;
    (void)cut_back();
    return s.err();
  }
  if (files::fdatasync_fd(active_fd_) != 0) {
    // After a failed sync the kernel may have dropped the batch's dirty pages
    // (and reports the error once): the batch is not durable, so it is cut
    // off; the caller appends it again, under the same seqs.
    const int why = errno;
    broken_ = true;
    (void)cut_back();
    return files::errno_error("fdatasync", seg.path, why);
  }
  seg.bytes += buf.size();
  seg.last_seq += records.size();
  last_seq_ += records.size();
  return first;
}

result<std::vector<std::pair<std::uint64_t, std::string>>> spool::read_after(std::uint64_t after,
                                                                             std::size_t max) const {
  std::vector<std::pair<std::uint64_t, std::string>> out;
  std::uint64_t from = std::max(after, confirmed_);
  for (const segment& seg : segments_) {
    if (out.size() >= max) break;
    if (seg.last_seq <= from) continue;
    const std::uint64_t start =
        seg.path == hint_path_ && hint_seq_ <= from && hint_off_ <= seg.bytes ? hint_off_ : 0;
    std::string data(seg.bytes - start, '\0');
    int fd = ::open(seg.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return files::errno_error("open", seg.path);
    std::size_t got = 0;
    int read_errno = 0;  // a failed pread: an I/O error, not a short segment
    while (got < data.size()) {
      const ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(start + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) read_errno = errno;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (read_errno != 0) return files::errno_error("read", seg.path, read_errno);
    if (got < data.size()) return corrupt(seg.path, start + got, "segment shrank since it was written");
    std::string_view d = data;
    parsed p;
    std::size_t off = 0;
    for (; off < d.size() && out.size() < max; off += p.size) {
      if (const char* bad = parse_at(d, off, p)) return corrupt(seg.path, start + off, bad);
      if (p.seq > from) out.emplace_back(p.seq, std::string(p.bytes));
      hint_path_ = seg.path;
      hint_seq_ = p.seq;
      hint_off_ = start + off + p.size;
    }
  }
  return out;
}

status spool::trim_through(std::uint64_t seq) {
  if (seq > last_seq_)
    return make_error(errc::invalid_argument, "cannot confirm audit seq " + std::to_string(seq) +
                                                  ": the spool ends at " + std::to_string(last_seq_));
  if (seq <= confirmed_) return {};
  // Watermark first: if we crash after deleting segments, a restart must not
  // mistake the gap for lost records.
  std::string wm_path = dir_ + "/" + std::string(watermark_name);
  if (auto s = files::write_atomic(wm_path, std::to_string(seq) + "\n", 0600); !s.ok()) return s;
  confirmed_ = seq;
  std::size_t drop = 0;
  while (drop + 1 < segments_.size() && segments_[drop].last_seq <= seq) {
    if (::unlink(segments_[drop].path.c_str()) != 0 && errno != ENOENT) {
      auto e = files::errno_error("delete confirmed segment", segments_[drop].path);
      segments_.erase(segments_.begin(), segments_.begin() + static_cast<std::ptrdiff_t>(drop));
      return e;
    }
    ++drop;
  }
  segments_.erase(segments_.begin(), segments_.begin() + static_cast<std::ptrdiff_t>(drop));
  return drop > 0 ? files::fsync_dir(dir_) : status{};
}

}  // namespace loom::audit
