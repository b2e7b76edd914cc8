#include "services/scheduler/models/data_hashes.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"

#include <filesystem>
#include <fstream>

namespace loom::scheduler {
namespace {

std::string hash_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return "missing: " + path;
  if (size > max_hashed_file_bytes) return "not hashed: " + std::to_string(size) + " bytes";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "missing: " + path + " (unreadable)";
  crypto::sha256_stream h;
  std::string buf(1 << 20, '\0');
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) return "missing: " + path + " (read error)";
  const auto d = h.finish();
  return crypto::to_hex(crypto::as_view(d));
}

}  // namespace

std::map<std::string, std::string> data_hashes(const std::vector<std::string>& lineage, const std::string& data_dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : lineage) {
    const auto colon = entry.find(':');
    if (colon == std::string::npos) continue;
    const std::string kind = entry.substr(0, colon), what = entry.substr(colon + 1);
    if (kind == "dataset") {
      if (what.empty() || what.find('/') != std::string::npos || what == "..") continue;  // not a dataset name
      out[entry] = hash_file(data_dir + "/datasets/" + what + "/manifest.json");
    } else if (kind == "shards") {
      out[entry] = hash_file(what + "/manifest.json");
    } else if ((kind == "text" || kind == "sft" || kind == "prefs") && !what.empty() && what.front() == '/') {
      out[entry] = hash_file(what);
    }
  }
  return out;
}

}  // namespace loom::scheduler
