// The keys the fuzz targets that read sealed files (fuzz_sealed,
// fuzz_snapshot) and fuzz_seeds share, so a seed sealed by fuzz_seeds
// unseals in the target and the fuzzer starts past the header: an at-rest
// KEK directory holding one fixed version-1 KEK (never a deployment's: its
// bytes are in this file), and the snapshot manifests' signing key. Not
// thread-safe (one store per process, made once).
#pragma once

#include "libs/atrest/kek_store.hpp"
#include "libs/files/secret_files.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace loom::fuzz {

// The fixed KEK's creation time; sealing "now" at this instant never rotates it.
inline const atrest::sys_time kek_made = atrest::sys_time{} + std::chrono::seconds(1'700'000'000);
// MANIFEST.json's HMAC key of every snapshot seed (the target signs with it too).
inline constexpr std::string_view snapshot_key = "fuzz-snapshot-manifest-key-0123456789";

// A kek_store over `dir` (made 0700) holding the fixed KEK version 1;
// aborts when it cannot be made (a broken scratch directory, not a finding).
inline std::unique_ptr<atrest::kek_store> fixed_kek_store(const std::string& dir) {
  const std::string text = "loom-atrest-kek v1 1 " +
                           std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              kek_made.time_since_epoch()).count()) +
                           " " + std::string(64, 'a') + "\n";
  auto made = files::secret::make_private_dir(dir);
  auto wrote = made ? files::secret::create_exclusive(dir + "/kek-000001.key", text) : made;
  if (!wrote && wrote.code() != errc::already_exists) {
    std::fprintf(stderr, "fixed_kek_store: %s\n", wrote.err().to_string().c_str());
    std::abort();
  }
  atrest::kek_options o;
  o.create = false;
  auto k = atrest::kek_store::open(dir, o, kek_made);
  if (!k) {
    std::fprintf(stderr, "fixed_kek_store: %s\n", k.err().to_string().c_str());
    std::abort();
  }
  return std::move(*k);
}

}  // namespace loom::fuzz
