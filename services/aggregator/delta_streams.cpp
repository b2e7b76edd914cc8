#include "services/aggregator/delta_streams.hpp"

#include "libs/files/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace loom::aggregator {
namespace {
std::string upload_key(const std::string& key, const std::string& job, std::uint32_t fragment) {
  return key + "\n" + job + "\n" + std::to_string(fragment);
}

// Appends `bytes` to `path` (created 0600). The error names the file.
status append(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(errc::unavailable, "spool " + path + ": " + std::strerror(errno));
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return make_error(errc::unavailable, "spool " + path + ": " + std::strerror(e));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  ::close(fd);
  return ok_status();
}
}  // namespace

delta_streams::delta_streams(std::string spool, std::chrono::seconds idle) : spool_(std::move(spool)), idle_(idle) {
  if (spool_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(spool_, ec);  // a previous process's pieces: its uploads ended with it
  (void)files::make_dirs(spool_);
}

delta_streams::~delta_streams() {
  for (const auto& [k, u] : uploads_) drop(u);
}

void delta_streams::drop(const upload& u) {
  if (u.file.empty()) return;
  std::error_code ec;
  std::filesystem::remove(u.file, ec);
}

result<std::uint64_t> delta_streams::chunk(const std::string& key, const loom::v1::DeltaChunk& c,
                                           std::string_view bytes, std::uint64_t limit, time_point now) {
  const std::string what = "delta chunk of job " + c.job() + " fragment " + std::to_string(c.fragment()) + " round " +
                           std::to_string(c.round());
  if (c.total_bytes() == 0 || c.total_bytes() > limit)
    return make_error(errc::invalid_argument, what + ": a payload of " + std::to_string(c.total_bytes()) +
                                                  " bytes (this fragment's holds at most " + std::to_string(limit) + ")");
  if (bytes.empty() || c.offset() + bytes.size() > c.total_bytes() || c.payload_sha256().size() != 32)
    return make_error(errc::invalid_argument, what + ": bytes [" + std::to_string(c.offset()) + ", " +
                                                  std::to_string(c.offset() + bytes.size()) + ") of a payload of " +
                                                  std::to_string(c.total_bytes()) + " (or no SHA-256 of 32 bytes)");
  const std::string k = upload_key(key, c.job(), c.fragment());
  auto it = uploads_.find(k);
  const bool same = it != uploads_.end() && it->second.round == c.round() && it->second.total == c.total_bytes() &&
                    it->second.sha256 == c.payload_sha256() && it->second.site == c.site();
  if (!same) {
    if (c.offset() != 0)
      return make_error(errc::conflict, what + ": no upload of it is held here (the aggregator restarted, or it "
                                               "expired): send it again from offset 0");
    upload u{c.job(), c.site(), c.payload_sha256(), c.round(), c.total_bytes(), c.fragment(), {}, {}, 0, 0, now};
    if (!spool_.empty()) u.file = spool_ + "/upload-" + std::to_string(++next_file_) + ".part";
    if (it != uploads_.end()) {  // a new delta replaces the one before
      drop(it->second);
      it->second = std::move(u);
    } else {
      it = uploads_.emplace(k, std::move(u)).first;
    }
  }
  auto& u = it->second;
  u.touched = now;
  const std::uint64_t held = u.held;
  if (c.offset() + bytes.size() <= held) return held;  // a retry of a piece held already
  if (c.offset() != held)
    return make_error(errc::conflict, what + ": bytes from offset " + std::to_string(c.offset()) + ", but " +
                                          std::to_string(held) + " are held: send from offset " + std::to_string(held));
  if (u.file.empty()) {
    u.bytes.append(bytes);
  } else {
    spool_key_.seal_into(bytes, u.pieces, sealing_);
    if (auto st = append(u.file, sealing_); !st) {
      drop(u);  // what was held may be part-written: start again
      uploads_.erase(it);
      return make_error(st.code(), what + ": " + st.err().message + " (send it again from offset 0)");
    }
    ++u.pieces;
  }
  u.held += bytes.size();
  return u.held;
}

result<std::string> delta_streams::complete(const std::string& key, const loom::v1::DeltaHeader& h,
                                            std::string_view last) {
  const std::string what = "delta of job " + h.job() + " fragment " + std::to_string(h.fragment()) + " round " +
                           std::to_string(h.round());
  auto it = uploads_.find(upload_key(key, h.job(), h.fragment()));
  if (it == uploads_.end())
    return make_error(errc::conflict, what + ": its header says " + std::to_string(h.payload_offset()) +
                                          " bytes came before it, but none are held: send it again from offset 0");
  auto& u = it->second;
  if (u.round != h.round() || u.total != h.payload_bytes() || u.sha256 != h.payload_sha256() || u.site != h.site())
    return make_error(errc::conflict, what + ": the pieces held are of another payload (round " +
                                          std::to_string(u.round) + ", " + std::to_string(u.total) +
                                          " bytes): send it again from offset 0");
  if (u.held != h.payload_offset() || h.payload_offset() + last.size() != u.total)
    return make_error(errc::conflict, what + ": " + std::to_string(u.held) + " bytes held and " +
                                          std::to_string(last.size()) + " in the header's frame from offset " +
                                          std::to_string(h.payload_offset()) + " do not make its " +
                                          std::to_string(u.total) + " bytes");
  std::string whole = std::move(u.bytes);
  if (!u.file.empty()) {
    const std::string file = u.file;
    const std::uint64_t held = u.held;
    auto read = files::read_file(file);
    drop(u);
    if (read)
      if (auto st = spool_key_.open_in_place(*read, file); !st) read = st.err();
    if (!read || read->size() != held) {
      uploads_.erase(it);
      return make_error(errc::unavailable, what + ": its pieces in " + file + " cannot be read back (" +
                                               (read ? std::to_string(read->size()) + " bytes" : read.err().message) +
                                               "): send it again from offset 0");
    }
    whole = std::move(*read);
  }
  whole.append(last);
  uploads_.erase(it);
  return whole;
}

void delta_streams::keep_pull(const std::string& key, const std::string& job, std::uint32_t fragment,
                              const global_update_header& h, std::shared_ptr<const std::string> payload) {
  pulls_[key] = pulled{job, fragment, kept{h, std::move(payload)}};
}

result<delta_streams::kept> delta_streams::kept_pull(const std::string& key, const std::string& job,
                                                     std::uint32_t fragment) const {
  auto it = pulls_.find(key);
  if (it == pulls_.end() || it->second.job != job || it->second.fragment != fragment)
    return make_error(errc::conflict, "pull of job " + job + " fragment " + std::to_string(fragment) +
                                          ": no payload is kept for a later slice (another pull came between, or the "
                                          "aggregator restarted): pull again from offset 0");
  return it->second.what;
}

void delta_streams::expire(time_point now) {
  std::erase_if(uploads_, [&](const auto& kv) {
    if (now - kv.second.touched <= idle_) return false;
    drop(kv.second);
    return true;
  });
}

std::uint64_t delta_streams::staged_bytes() const {
  std::uint64_t n = 0;
  for (const auto& [k, u] : uploads_) n += u.held;
  return n;
}

std::uint64_t delta_streams::staged_in_memory() const {
  std::uint64_t n = 0;
  for (const auto& [k, u] : uploads_) n += u.bytes.size();
  return n;
}

}  // namespace loom::aggregator
