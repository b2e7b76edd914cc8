// Files a deployment wrote, as plaintext: the trainer seals its snapshots and
// stage datasets at rest by default (libs/atrest), under the key directory of
// its data dir, so a test reads them with that directory's keys — the way any
// process of that deployment does — instead of their bytes on disk.
#pragma once

#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/object.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace loom::test {

// The plaintext of `path`, written by a service or run of data dir `data_dir`
// (sealed or plain); fails the test when it cannot be read.
// The at-rest keys of data dir `data_dir` as a reader opens them (never
// made); null when it has none.
inline std::shared_ptr<atrest::kek_store> keys_of(const std::string& data_dir) {
  atrest::kek_options o;
  o.create = false;
  auto keys = atrest::kek_store::open(data_dir + "/keys/atrest", o, std::chrono::system_clock::now());
  return keys ? std::shared_ptr<atrest::kek_store>(std::move(*keys)) : nullptr;
}

inline std::string plain_file(const std::string& path, const std::string& data_dir) {
  auto r = atrest::read_object(path, keys_of(data_dir).get());
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : r.err().to_string()));  // doctest -s reads the message on success too
  return *r;
}

// For a scope, the keys at rest of data dir `data_dir` are this process's
// (what ckpt::verify_snapshot, load_latest and read_safetensors unseal with).
struct process_keys_of {
  explicit process_keys_of(const std::string& data_dir) { atrest::set_process_keys(keys_of(data_dir)); }
  ~process_keys_of() { atrest::set_process_keys(nullptr); }
  process_keys_of(const process_keys_of&) = delete;
  process_keys_of& operator=(const process_keys_of&) = delete;
};

// The SHA-256 of a snapshot file's plaintext as its signed MANIFEST.json
// lists it (the same whether the file is sealed or plain).
inline std::string listed_sha256(const std::string& snapshot_dir, const std::string& file) {
  auto m = nlohmann::json::parse(plain_file(snapshot_dir + "/MANIFEST.json", "/nonexistent"), nullptr, false);
  REQUIRE_MESSAGE(m.is_object(), snapshot_dir << "/MANIFEST.json is not JSON");
  REQUIRE_MESSAGE(m["files"].contains(file), snapshot_dir << " lists no " << file);
  return m["files"][file]["sha256"].get<std::string>();
}

}  // namespace loom::test
