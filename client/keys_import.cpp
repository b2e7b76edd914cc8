#include "client/keys_import.hpp"

#include "libs/files/files.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace loom::cli {

namespace fs = std::filesystem;

result<std::vector<std::string>> import_keys(const std::string& from, const std::string& keys_dir) {
  std::error_code ec;
  if (!fs::is_directory(from, ec))
    return make_error(errc::not_found, "--from " + from + " is not a directory (mount the keys' Secret there)");
  std::vector<std::pair<std::string, fs::path>> found;  // (relative name, source)
  auto opts = fs::directory_options::follow_directory_symlink;
  for (fs::recursive_directory_iterator it(from, opts, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("..", 0) == 0) {  // a Secret volume's timestamped dirs and ..data
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;  // follows the symlink to what it names
    const fs::path rel = it->path().lexically_relative(from);  // the names as mounted, not what they link to
    if (rel.empty() || rel.is_absolute() || *rel.begin() == "..")
      return make_error(errc::invalid_argument, it->path().string() + " is not inside " + from);
    found.emplace_back(rel.generic_string(), it->path());
  }
  if (ec) return make_error(errc::unavailable, "reading " + from + ": " + ec.message());
  if (found.empty()) return make_error(errc::not_found, "--from " + from + " holds no key file");
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (const auto& [rel, src] : found) {
    const auto size = fs::file_size(src, ec);
    if (ec || size > (1u << 20))
      return make_error(errc::invalid_argument, src.string() + ": " + (ec ? ec.message() : "larger than 1 MiB: not a key"));
    auto bytes = files::read_file(src.string());
    if (!bytes) return make_error(bytes.code(), src.string() + ": " + bytes.err().message);
    const fs::path to = fs::path(keys_dir) / rel;
    if (auto st = files::make_dirs(to.parent_path().string(), 0700); !st) return st.err();
    if (auto st = files::write_atomic(to.string(), *bytes, 0600); !st) return st.err();
    out.push_back(rel);
  }
  return out;
}

}  // namespace loom::cli
