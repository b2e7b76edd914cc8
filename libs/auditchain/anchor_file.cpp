#include "libs/auditchain/anchor_file.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"

#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::auditchain {
namespace {

template <class T>
bool parse_int(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

}  // namespace

std::string format_anchor_line(const checkpoint& c) {
  return "v1 " + std::to_string(c.seq) + " " + std::to_string(c.unix_ns) + " " + c.key_id + " " + to_hex(c.row_hash) +
         " " + crypto::to_hex(c.signature) + "\n";
}

result<checkpoint> parse_anchor_line(std::string_view line) {
  std::vector<std::string_view> f;
  while (!line.empty()) {
    auto sp = line.find(' ');
    f.push_back(line.substr(0, sp));
    line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
  }
  auto bad = [](const char* why) { return make_error(errc::corruption, std::string("anchor line: ") + why); };
  if (f.size() != 6 || f[0] != "v1") return bad("expected 'v1 seq unix_ns key_id row_hash signature'");
  checkpoint c;
  if (!parse_int(f[1], c.seq) || !parse_int(f[2], c.unix_ns)) return bad("bad seq or time");
  c.key_id = std::string(f[3]);
  auto h = crypto::from_hex(f[4]);
  auto sig = crypto::from_hex(f[5]);
  if (!h || !sig) return bad("bad hex");
  auto hh = hash_from_bytes(*h);
  if (!hh) return bad("row hash is not 32 bytes");
  c.row_hash = *hh;
  c.signature = std::move(*sig);
  return c;
}

result<std::unique_ptr<anchor_file>> anchor_file::open(const std::string& path) {
  bool existed = std::filesystem::exists(path);
  if (existed) {
    auto text = files::read_file(path);
    if (!text) return text.err();
    if (!text->empty() && text->back() != '\n') {
      auto keep = text->rfind('\n');
      off_t len = keep == std::string::npos ? 0 : static_cast<off_t>(keep + 1);
      if (::truncate(path.c_str(), len) != 0) return files::errno_error("truncate torn line of", path);
    }
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return files::errno_error("open", path);
  if (!existed) {
    std::filesystem::path p(path);
    if (auto s = files::fsync_dir(p.has_parent_path() ? p.parent_path().string() : "."); !s) {
      ::close(fd);
      return s.err();
    }
  }
  return std::unique_ptr<anchor_file>(new anchor_file(fd, path));
}

anchor_file::~anchor_file() { ::close(fd_); }

status anchor_file::append(std::span<const checkpoint> cs) {
  if (cs.empty()) return ok_status();
  std::string lines;
  for (const auto& c : cs) lines += format_anchor_line(c);
  // A failed write must not leave half a line for the next append to extend.
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  auto undo = [&](error e) {
    if (before >= 0) (void)::ftruncate(fd_, before);
    return e;
  };
  std::string_view left = lines;
  while (!left.empty()) {
    ssize_t n = ::write(fd_, left.data(), left.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return undo(files::errno_error("append to", path_));
    }
    left.remove_prefix(static_cast<std::size_t>(n));
  }
  if (files::fdatasync_fd(fd_) != 0) return undo(files::errno_error("fsync", path_));
  return ok_status();
}

result<anchor_file_contents> read_anchor_file(const std::string& path) {
  auto text = files::read_file(path);
  if (!text) return text.err();
  anchor_file_contents out;
  std::string_view rest = *text;
  for (std::size_t line_no = 1; !rest.empty(); ++line_no) {
    auto nl = rest.find('\n');
    if (nl == std::string_view::npos) {
      out.torn_tail = true;  // a crash mid-append: never fsynced, never relied on
      break;
    }
    auto c = parse_anchor_line(rest.substr(0, nl));
    if (!c) return make_error(errc::corruption, path + " line " + std::to_string(line_no) + ": " + c.err().message);
    out.checkpoints.push_back(std::move(*c));
    rest.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace loom::auditchain
