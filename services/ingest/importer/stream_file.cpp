#include "services/ingest/importer/stream_file.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/atrest/sealed.hpp"
#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace loom::ingest {
result<out_stream> out_stream::create(const std::string& path, std::size_t buffer_bytes,
                                      std::shared_ptr<atrest::kek_store> seal) {
  out_stream s;
  if (seal) {
    auto w = atrest::sealed_writer::create(path, *seal, loom::wall_now(), 0644);
    if (!w) return w.err();
    s.sealed_ = std::move(*w);
    s.keys_ = std::move(seal);
  } else {
    s.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s.fd_ < 0) return files::errno_error("create", path);
  }
  s.path_ = path;
  s.buf_.resize(buffer_bytes > 0 ? buffer_bytes : 4096);
  return s;
}

out_stream::out_stream(out_stream&& o) noexcept
    : fd_(o.fd_), keys_(std::move(o.keys_)), sealed_(std::move(o.sealed_)), path_(std::move(o.path_)),
      buf_(std::move(o.buf_)), used_(o.used_), written_(o.written_) {
  o.fd_ = -1;
}

out_stream& out_stream::operator=(out_stream&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    keys_ = std::move(o.keys_);
    sealed_ = std::move(o.sealed_);
    path_ = std::move(o.path_);
    buf_ = std::move(o.buf_);
    used_ = o.used_;
    written_ = o.written_;
    o.fd_ = -1;
  }
  return *this;
}

out_stream::~out_stream() {
  if (fd_ >= 0) ::close(fd_);
}

status out_stream::flush() {
  const std::string_view bytes(buf_.data(), used_);
  if (auto st = sealed_ ? sealed_->append(bytes) : files::write_all(fd_, bytes, path_); !st) return st;
  used_ = 0;
  return ok_status();
}

status out_stream::write(std::string_view bytes) {
  written_ += bytes.size();
  while (!bytes.empty()) {
    if (used_ == buf_.size())
      if (auto st = flush(); !st) return st;
    const std::size_t n = std::min(bytes.size(), buf_.size() - used_);
    std::memcpy(buf_.data() + used_, bytes.data(), n);
    used_ += n;
    bytes.remove_prefix(n);
  }
  return ok_status();
}

status out_stream::close(bool durable) {
  if (sealed_) {
    status st = flush();
    if (st)
      if (auto done = sealed_->finish(); !done) st = done.err();
    sealed_.reset();
    std::vector<char>().swap(buf_);
    return st;
  }
  if (fd_ < 0) return make_error(errc::invalid_argument, "close " + path_ + ": already closed");
  status st = flush();
  if (st && durable && files::fsync_fd(fd_) != 0) st = files::errno_error("fsync", path_);
  if (::close(fd_) != 0 && st) st = files::errno_error("close", path_);
  fd_ = -1;
  std::vector<char>().swap(buf_);
  return st;
}

}  // namespace loom::ingest
