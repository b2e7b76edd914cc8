// Record types that libs/dedup sorts and spills (internal). No implicit padding:
// every byte written to a run file is initialised. Ordering = the merge order.
#pragma once

#include "libs/dedup/fingerprint.hpp"
#include "libs/dedup/index.hpp"

#include <array>
#include <cstdint>
#include <tuple>

namespace loom::dedup::detail {

// One per document: exact groups are runs of equal keys, smallest id first.
struct exact_rec {
  content_key key;
  doc_id id;
  std::uint64_t seq = 0;
  bool operator<(const exact_rec& o) const { return std::tie(key, id) < std::tie(o.key, o.id); }
};
static_assert(sizeof(exact_rec) == 40);

// One per document and band: LSH buckets are runs of equal keys, by id.
struct band_rec {
  std::uint64_t key = 0;
  doc_id id;
  std::uint64_t seq = 0;
  bool operator<(const band_rec& o) const { return std::tie(key, id) < std::tie(o.key, o.id); }
};
static_assert(sizeof(band_rec) == 32);

// One per document in a cluster: grouped by union-find root, smallest id first.
struct member_rec {
  std::uint32_t root = 0;
  std::uint32_t seq = 0;
  doc_id id;
  bool operator<(const member_rec& o) const { return std::tie(root, id) < std::tie(o.root, o.id); }
};
static_assert(sizeof(member_rec) == 24);

// One per dropped document: the verdicts, by id.
struct drop_rec {
  doc_id id;
  doc_id kept_by;
  std::uint64_t why = 0;  // dedup::reason
  bool operator<(const drop_rec& o) const { return id < o.id; }
};
static_assert(sizeof(drop_rec) == 40);

// The low 16 bits of each minimum: two entries agree by chance with p = 2^-16,
// which moves the estimated Jaccard by < 0.0001; half the bytes of 32.
using sig16 = std::array<std::uint16_t, permutations>;

}  // namespace loom::dedup::detail
