// The data a model version read, pinned: for each lineage entry of a stage
// ("dataset:NAME", "text:/path", "sft:/path", "prefs:/path", "shards:/dir")
// the SHA-256 of what it names at registration time — an ingested dataset's
// manifest.json (which lists every shard's hash), a raw file's bytes (files
// up to max_hashed_file_bytes; larger ones are recorded as not hashed), a
// shard directory's manifest.json. Built-in sources (synthetic pairs) have
// none. Read by the model registry on the scheduler's thread, outside any
// transaction; a missing file is recorded as such, never an error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::scheduler {

inline constexpr std::uint64_t max_hashed_file_bytes = 256ull << 20;

// entry -> lower-case hex SHA-256, or "missing: ..." / "not hashed: N bytes".
// data_dir: the deployment's data dir (where datasets/NAME/ live).
std::map<std::string, std::string> data_hashes(const std::vector<std::string>& lineage, const std::string& data_dir);

}  // namespace loom::scheduler
