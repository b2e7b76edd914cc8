#include "libs/runtime/cgroup_files.hpp"

#include "libs/files/files.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace loom::runtime::cgroup {

std::optional<std::string> read(const std::string& path) {
  auto text = files::read_file(path);
  if (!text) return std::nullopt;
  return std::move(*text);
}

std::string own(const std::string& self_cgroup, std::string_view controller) {
  std::istringstream in(self_cgroup);
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string list = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controller.empty()) {
      if (list.empty() && line.starts_with("0:")) return path;
      continue;
    }
    std::istringstream cs(list);
    for (std::string c; std::getline(cs, c, ',');)
      if (c == controller) return path;
  }
  return "";
}

std::uint64_t field(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ' ')
      return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10);
  return 0;
}

std::string bytes_text(std::uint64_t b) {
  char s[32];
  if (b >= (1ull << 30)) std::snprintf(s, sizeof s, "%.1f GiB", double(b) / double(1ull << 30));
  else std::snprintf(s, sizeof s, "%.0f MiB", double(b) / double(1ull << 20));
  return s;
}

}  // namespace loom::runtime::cgroup
