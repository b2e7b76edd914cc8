// Test support for libs/auditchain (never linked into services): random
// events from a seeded generator, and a chain built through chain_writer in a
// scratch database of the suite's engine (store::testing), with its keys and
// anchor file in a temp dir. Single-threaded; header-only so the in-memory
// and store suites share it.
#pragma once

#include "libs/auditchain/anchor_file.hpp"
#include "libs/auditchain/checkpoint.hpp"
#include "libs/auditchain/keyring.hpp"
#include "libs/auditchain/row.hpp"
#include "libs/auditchain/store_io.hpp"
#include "libs/files/temp_dir.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace loom::auditchain::testing {

// ASCII letters, digits and a few separators: valid UTF-8 text on PostgreSQL.
inline std::string random_text(std::mt19937_64& rng, std::size_t min_len, std::size_t max_len) {
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@:/";
  std::uniform_int_distribution<std::size_t> len(min_len, max_len), pick(0, sizeof alphabet - 2);
  std::string s(len(rng), ' ');
  for (auto& c : s) c = alphabet[pick(rng)];
  return s;
}

inline std::string random_bytes(std::mt19937_64& rng, std::size_t min_len, std::size_t max_len) {
  std::uniform_int_distribution<std::size_t> len(min_len, max_len);
  std::string s(len(rng), '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// An event as a service would emit it: fields set, seq/payload/hashes not.
// `source_seq` counts per source, like the emitters' spools.
struct event_source {
  std::mt19937_64 rng;
  std::vector<std::pair<std::string, std::uint64_t>> sources;

  explicit event_source(std::uint64_t seed) : rng(seed) {
    for (const char* s : {"scheduler", "ingest", "trainer", "aggregator"})
      sources.emplace_back(std::string(s) + "@" + random_text(rng, 4, 10), 0);
  }

  // The row's metadata and its plaintext payload.
  std::pair<chain_row, std::string> next(std::int64_t unix_ns) {
    chain_row r;
    auto& [src, n] = sources[rng() % sources.size()];
    r.unix_ns = unix_ns;
    r.source = src;
    r.source_seq = ++n;
    r.service = src.substr(0, src.find('@'));
    r.peer_key = random_text(rng, 8, 40);
    r.principal = random_text(rng, 3, 16);
    r.role = random_text(rng, 3, 10);
    r.zone = random_text(rng, 2, 12);
    r.action = random_text(rng, 5, 24);
    r.job_id = random_text(rng, 6, 16);
    r.request_id = random_text(rng, 16, 32);
    r.decision = static_cast<std::int32_t>(1 + rng() % 3);
    r.reason = random_text(rng, 1, 60);
    // A quarter of the rows as stored before tenants (version 1, no tenant);
    // the rest a tenant's, or no tenant's (admins only).
    if (rng() % 4 == 0) {
      r.version = row_version_v1;
    } else if (rng() % 3 != 0) {
      r.tenant = random_text(rng, 3, 12);
    }
    return {std::move(r), random_bytes(rng, 0, 300)};
  }
};

}  // namespace loom::auditchain::testing
