#include "client/input.hpp"

#include "libs/files/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <iterator>

namespace loom::cli {

std::string size_text(std::uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  std::size_t u = 0;
  while (u + 1 < std::size(units) && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + " " + units[u];
}

result<std::string> read_capped(const std::string& path, std::uint64_t limit, std::string_view who) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  std::string out;
  char buf[65536];
  for (;;) {
    const std::uint64_t room = limit + 1 - out.size();  // one byte past the limit tells "larger"
    const ssize_t n = ::read(fd, buf, static_cast<std::size_t>(std::min<std::uint64_t>(sizeof buf, room)));
    if (n < 0) {
      if (errno == EINTR) continue;
      auto e = files::errno_error("read", path);
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > limit) {
      ::close(fd);
      return make_error(errc::resource_exhausted, path + " is larger than " + size_text(limit) + " (the most " +
                                                      std::string(who) + " reads)");
    }
  }
  ::close(fd);
  return out;
}

result<std::vector<std::string>> input_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return make_error(errc::not_found, "cannot read " + path + ": no such file or directory");
  if (fs::is_regular_file(st)) return std::vector<std::string>{path};
  if (!fs::is_directory(st))
    return make_error(errc::invalid_argument, path + " is not a regular file or a directory (a device or a pipe may "
                                                     "never end; copy what to train on into a file)");
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) files.push_back(it->path().string());
  if (ec) return make_error(errc::not_found, "cannot list " + path + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace loom::cli
