// fragment_store: one fragment's file of a saved aggregation (format 2; the
// manifest that names these files and the crash argument are job_store.hpp's):
//
//   <data>/aggregator/<job>/fragment-<p>-v<version>.bin =
//     "LOOMAGF2" | u64 LE header length | AggregationFragment (protobuf) |
//     θ_p | m_p | e_p (raw fp32, LE) | the held outer update's payload
//
// The header names the job, the fragment, its version, the value counts, each
// site's last round of this fragment inside a step and the held update's
// fields. Written from views of the job's live buffers, so a save holds no
// copy of the fragment; read back into a job's full vectors.
// Stateless functions.
#pragma once

#include "libs/diloco/fragment_plan.hpp"
#include "services/aggregator/aggregation.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace loom::aggregator {

// What one fragment's file is written from. The views are of the job's own
// θ and m (fragment p's ranges, in the plan's order) and e_p: the caller
// keeps them unchanged until save_fragment returns (aggregation::defer_saves
// says how the aggregation does).
struct fragment_source {
  std::string job;
  std::uint32_t fragment = 0;
  std::uint64_t version = 0;
  std::vector<std::span<const float>> params, momentum;  // momentum empty when μ = 0
  std::span<const float> residual;
  std::vector<std::pair<std::string, std::int64_t>> last_round;  // (site, its last round of p inside a step)
  std::optional<held_update> held;
};

// "fragment-<p>-v<version>.bin": a new version is a new file, so the one the
// manifest names stays until a manifest names its successor.
std::string fragment_name(std::uint32_t p, std::uint64_t version);

// Writes <dir>/fragment_name(...) atomically (files::write_atomic_parts) and
// says what a manifest names it by: the errors of the write, naming the file.
result<fragment_file> save_fragment(const std::string& dir, const fragment_source& f);

// Reads the file `entry` names in `dir` into fragment entry.fragment of `s`:
// θ_p and m_p by the plan's ranges, e_p at its offset in s.residual, the
// sites' last rounds of p (a site s.sites lacks is left out: it joins again),
// the held update. First checks that it is the file the manifest names (size,
// SHA-256) and then that its header agrees (job, fragment, version, counts).
// A missing or wrong file is corruption naming the file and the job.
// REQUIRES: s.spec, s.sites (last_round sized per fragment), s.params,
// s.residual (and s.momentum unless μ = 0) sized for `plan`.
status load_fragment(const std::string& dir, const fragment_file& entry, const diloco::fragment_plan& plan,
                     saved_state& s);

// A held update read back (either format): the saved fields, its payload and
// what the payload says of itself (element count, SHA-256). corruption
// (`where` naming the file) when the payload is not a codec payload.
result<held_update> held_from(const std::string& where, const std::string& job, std::uint32_t fragment,
                              std::uint64_t version, std::uint64_t round, std::uint32_t contributors,
                              std::string codec, std::string payload);

}  // namespace loom::aggregator
