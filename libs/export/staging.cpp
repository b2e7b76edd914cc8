#include "libs/export/staging.hpp"

#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::exporter {
namespace fs = std::filesystem;
namespace {

// Big enough that write(2) calls are few, small next to any model.
constexpr std::size_t buffer_bytes = std::size_t(1) << 20;

error exists_error(const fs::path& out, const std::string& why) {
  return make_error(errc::already_exists, "export destination " + out.string() + " " + why +
                                              ": choose a new path or remove it first");
}

// "dir/" names "dir".
fs::path without_trailing_slash(fs::path p) {
  while (!p.has_filename() && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  return p;
}

// The destination's directory, created if missing ("." for a bare name).
result<fs::path> parent_of(const fs::path& out) {
  if (out.empty() || out.filename().empty() || out.filename() == "." || out.filename() == "..")
    return make_error(errc::invalid_argument, "export destination '" + out.string() + "' names no file");
  fs::path parent = out.parent_path();
  if (parent.empty()) parent = ".";
  if (auto st = files::make_dirs(parent.string()); !st) return st.err();
  return parent;
}

// `name` with a unique suffix from the template, under `parent`.
std::string temp_template(const fs::path& parent, const fs::path& out) {
  return (parent / ("." + out.filename().string() + ".tmp-XXXXXX")).string();
}

status fsync_path(const fs::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", p.string());
  const int rc = files::fsync_fd(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) return files::errno_error("fsync", p.string(), e);
  return ok_status();
}

}  // namespace

result<staged_file> staged_file::create(const fs::path& given) {
  const fs::path out = without_trailing_slash(given);
  auto parent = parent_of(out);
  if (!parent) return parent.err();
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec))) return exists_error(out, "exists");
  std::string tmpl = temp_template(*parent, out);
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return files::errno_error("create temp file beside", out.string());
  ::fchmod(fd, files::masked_mode(0644));
  staged_file f;
  f.out_ = out;
  f.temp_ = tmpl;
  f.fd_ = fd;
  f.buf_.reserve(buffer_bytes);
  return f;
}

staged_file::staged_file(staged_file&& o) noexcept
    : out_(std::move(o.out_)), temp_(std::move(o.temp_)), fd_(o.fd_), buf_(std::move(o.buf_)),
      written_(o.written_), committed_(o.committed_) {
  o.fd_ = -1;
  o.temp_.clear();
}

staged_file::~staged_file() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

status staged_file::flush() {
  std::size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return files::errno_error("write", temp_.string());
    done += static_cast<std::size_t>(n);
  }
  buf_.clear();
  return ok_status();
}

status staged_file::write(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const std::size_t n = std::min(bytes.size(), buffer_bytes - buf_.size());
    buf_.insert(buf_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    bytes = bytes.subspan(n);
    written_ += n;
    if (buf_.size() == buffer_bytes)
      if (auto st = flush(); !st) return st;
  }
  return ok_status();
}

status staged_file::write(std::string_view bytes) {
  return write(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

status staged_file::commit() {
  if (auto st = flush(); !st) return st;
  if (files::fsync_fd(fd_) != 0) return files::errno_error("fsync", temp_.string());
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return files::errno_error("close", temp_.string());
  // RENAME_NOREPLACE: a file that appeared at `out` since create() is not replaced.
  int rc2 = ::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, out_.c_str(), RENAME_NOREPLACE);
  if (rc2 != 0 && errno == EINVAL) {  // a filesystem without the flag: check, then rename
    std::error_code ec;
    if (fs::exists(fs::symlink_status(out_, ec))) return exists_error(out_, "appeared during the export");
    rc2 = ::rename(temp_.c_str(), out_.c_str());
  }
  if (rc2 != 0) {
    if (errno == EEXIST) return exists_error(out_, "appeared during the export");
    return files::errno_error("rename to", out_.string());
  }
  committed_ = true;
  fs::path parent = out_.parent_path();
  return files::fsync_dir(parent.empty() ? "." : parent.string());
}

result<staged_dir> staged_dir::create(const fs::path& given) {
  const fs::path out = without_trailing_slash(given);
  auto parent = parent_of(out);
  if (!parent) return parent.err();
  std::error_code ec;
  const auto st = fs::symlink_status(out, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return exists_error(out, "exists and is not a directory");
    if (!fs::is_empty(out, ec) || ec) return exists_error(out, "is a directory that is not empty");
  }
  std::string tmpl = temp_template(*parent, out);
  if (!::mkdtemp(tmpl.data())) return files::errno_error("create temp directory beside", out.string());
  ::chmod(tmpl.c_str(), files::masked_mode(0755));  // mkdtemp makes 0700; mkdir would honour the umask
  staged_dir d;
  d.out_ = out;
  d.temp_ = tmpl;
  return d;
}

staged_dir::staged_dir(staged_dir&& o) noexcept
    : out_(std::move(o.out_)), temp_(std::move(o.temp_)), committed_(o.committed_) {
  o.temp_.clear();
}

staged_dir::~staged_dir() {
  if (committed_ || temp_.empty()) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

status staged_dir::commit() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(temp_, ec))
    if (e.is_regular_file())
      if (auto st = fsync_path(e.path(), O_RDONLY); !st) return st;
  if (ec) return make_error(errc::internal, "list " + temp_.string() + ": " + ec.message());
  if (auto st = files::fsync_dir(temp_.string()); !st) return st;
  // rename(2) replaces an empty directory and refuses one with entries.
  if (::rename(temp_.c_str(), out_.c_str()) != 0) {
    if (errno == ENOTEMPTY || errno == EEXIST) return exists_error(out_, "was filled during the export");
    return files::errno_error("rename to", out_.string());
  }
  committed_ = true;
  fs::path parent = out_.parent_path();
  return files::fsync_dir(parent.empty() ? "." : parent.string());
}

}  // namespace loom::exporter
