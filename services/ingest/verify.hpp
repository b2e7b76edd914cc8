// The body of a "verify" task (`loom data verify NAME`): every shard of a
// dataset against its SHA-256, on the task runner's thread. The manifest on
// disk must agree with the catalogue (names, sizes, hashes), and every file
// with the manifest; the finding is recorded in the catalogue
// (catalog::record_verify) so `loom data status` shows the dataset damaged
// until it is re-imported or verifies clean. The task fails (corruption)
// naming the dataset and each damaged shard file.
#pragma once

#include "libs/status/status.hpp"

#include <string>

namespace loom::ingest {

struct task_context;

// Verifies <datasets_root>/<dataset> (datasets_root: the tenant's, whose
// catalogue rows it compares and records). task_info: phase "hash" then "done",
// shards, bytes_read (bytes hashed), elapsed_s, mb_per_s, and report_json
// {"dataset", "shards", "bytes", "problems": [{"shard", "what"}]}. Errors:
// corruption (damaged), not_found (no such dataset), unavailable (stopped).
status verify_dataset(task_context& ctx, const std::string& datasets_root, const std::string& tenant,
                      const std::string& dataset);

}  // namespace loom::ingest
