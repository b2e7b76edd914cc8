#include "services/audit/event_store.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "loom/v1/audit.pb.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace loom::audit_service {
namespace {
// Record: [u32 length][u32 check = first 4 bytes of SHA-256(body)][body].
constexpr std::size_t header_bytes = 8;
// An AuditEvent is small; anything larger than this is not one of ours.
constexpr std::uint32_t max_record = 1u << 20;

std::uint32_t check_of(std::string_view body) {
  auto d = crypto::sha256(body);
  return std::uint32_t(d[0]) << 24 | std::uint32_t(d[1]) << 16 | std::uint32_t(d[2]) << 8 | d[3];
}
void put32(char* p, std::uint32_t v) {
  p[0] = char(v >> 24);
  p[1] = char(v >> 16);
  p[2] = char(v >> 8);
  p[3] = char(v);
}
std::uint32_t get32(const char* p) {
  auto u = [&](int i) { return std::uint32_t(static_cast<unsigned char>(p[i])); };
  return u(0) << 24 | u(1) << 16 | u(2) << 8 | u(3);
}
}  // namespace

event_store::event_store(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
event_store::~event_store() {
  if (fd_ >= 0) ::close(fd_);
}

result<std::unique_ptr<event_store>> event_store::open(const std::string& dir) {
  if (auto st = files::make_dirs(dir, 0700); !st) return st.err();
  std::string path = dir + "/events.log";
  auto existing = files::read_file(path);
  std::string data = existing ? std::move(*existing) : std::string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(errc::internal, "open " + path + ": " + std::strerror(errno));
  std::unique_ptr<event_store> s(new event_store(path, fd));
  std::size_t off = 0;
  while (off < data.size()) {
    bool torn = data.size() - off < header_bytes;
    std::uint32_t len = torn ? 0 : get32(data.data() + off);
    if (!torn && len > max_record)
      return make_error(errc::corruption, path + ": impossible record length " + std::to_string(len) +
                                              " at offset " + std::to_string(off));
    torn = torn || data.size() - off - header_bytes < len;
    std::string_view body = torn ? std::string_view() : std::string_view(data).substr(off + header_bytes, len);
    loom::v1::AuditEvent ev;
    bool bad = !torn && (check_of(body) != get32(data.data() + off + 4) || !ev.ParseFromArray(body.data(), int(len)));
    if (torn || bad) {
      if (off + header_bytes + len < data.size() && !torn)
        return make_error(errc::corruption, path + ": damaged record at offset " + std::to_string(off));
      std::fprintf(stderr, "audit: %s: cutting a torn tail of %zu bytes at offset %zu\n", path.c_str(),
                   data.size() - off, off);
      if (::ftruncate(fd, static_cast<off_t>(off)) != 0)
        return make_error(errc::internal, "truncate " + path + ": " + std::strerror(errno));
      break;
    }
    auto& n = s->next_[ev.source()];
    if (ev.source_seq() > n) n = ev.source_seq();
    ++s->total_;
    off += header_bytes + len;
  }
  s->durable_ = s->next_;
  s->durable_total_ = s->total_;
  s->bytes_ = s->durable_bytes_ = off;
  return s;
}

event_store::outcome event_store::append(std::string_view bytes) {
  loom::v1::AuditEvent ev;
  if (bytes.size() > max_record || !ev.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
      ev.source().empty() || ev.source_seq() == 0)
    return outcome::invalid;
  std::lock_guard lock(mu_);
  auto& n = next_[ev.source()];
  if (ev.source_seq() <= n) return outcome::duplicate;
  if (ev.source_seq() != n + 1) return outcome::gap;
  std::string rec(header_bytes, '\0');
  put32(rec.data(), static_cast<std::uint32_t>(bytes.size()));
  put32(rec.data() + 4, check_of(bytes));
  rec.append(bytes);
  std::size_t done = 0;
  while (done < rec.size()) {
    auto w = ::write(fd_, rec.data() + done, rec.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      // Undo a partial record so the log stays parseable; the event is re-sent.
      [[maybe_unused]] int rc = ::ftruncate(fd_, static_cast<off_t>(bytes_));
      return outcome::invalid;
    }
    done += static_cast<std::size_t>(w);
  }
  bytes_ += rec.size();
  n = ev.source_seq();
  ++total_;
  return outcome::stored;
}

status event_store::sync() {
  std::lock_guard lock(mu_);
  if (bytes_ == durable_bytes_) return {};
  if (::fdatasync(fd_) != 0) return make_error(errc::internal, "fdatasync " + path_ + ": " + std::strerror(errno));
  durable_ = next_;
  durable_total_ = total_;
  durable_bytes_ = bytes_;
  return {};
}

std::uint64_t event_store::watermark(const std::string& source) const {
  std::lock_guard lock(mu_);
  auto it = durable_.find(source);
  return it == durable_.end() ? 0 : it->second;
}

std::uint64_t event_store::total() const {
  std::lock_guard lock(mu_);
  return durable_total_;
}

result<std::vector<std::string>> event_store::scan(const std::string& source, std::uint64_t after_seq,
                                                   const std::string& request_id, std::size_t limit) const {
  std::uint64_t upto;
  {
    std::lock_guard lock(mu_);
    upto = durable_bytes_;
  }
  auto data = files::read_file(path_);
  if (!data) return data.err();
  std::vector<std::string> out;
  std::size_t off = 0;
  while (off + header_bytes <= upto && off + header_bytes <= data->size()) {
    std::uint32_t len = get32(data->data() + off);
    if (off + header_bytes + len > data->size()) break;
    std::string body = data->substr(off + header_bytes, len);
    off += header_bytes + len;
    loom::v1::AuditEvent ev;
    if (!ev.ParseFromString(body)) continue;
    if (!source.empty() && ev.source() != source) continue;
    if (ev.source_seq() <= after_seq && !source.empty()) continue;
    if (!request_id.empty() && ev.request_id() != request_id) continue;
    out.push_back(std::move(body));
    if (limit && out.size() >= limit) break;
  }
  return out;
}

}  // namespace loom::audit_service
