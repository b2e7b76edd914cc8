// fragment_store: one fragment's file of a saved aggregation (format 2; the
// manifest that names these files and the crash argument are job_store.hpp's):
//
//   <data>/aggregator/<job>/fragment-<p>-v<version>.bin =
//     "LOOMAGF2" | u64 LE header length | AggregationFragment (protobuf) |
//     θ_p | m_p | e_p (raw fp32, LE) | the held outer update's payload
//
// The header names the job, the fragment, its version, the value counts, ‖θ_p‖
// (so a job can bound deltas without reading θ_p back), each site's last round
// of this fragment inside a step and the held update's fields. Written from
// views of the job's live buffers, so a save holds no copy of the fragment;
// read back one part after another, straight into the vectors that keep them
// (a read holds the fragment once, never the file beside it).
// Sealed at rest (issue 32) when the process seals (atrest::sealing_keys, on
// by default): θ_p is the global model, so the file is sealed as it streams
// (atrest::sealed_writer) like a checkpoint, and read back through
// atrest::sealed_reader one verified chunk at a time; the manifest's size and
// SHA-256 are of the plaintext, so a plain and a sealed file are named alike.
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
  double theta_norm = 0;  // ‖θ_p‖
  std::vector<std::pair<std::string, std::int64_t>> last_round;  // (site, its last round of p inside a step)
  std::optional<held_update> held;
};

// "fragment-<p>-v<version>.bin": a new version is a new file, so the one the
// manifest names stays until a manifest names its successor.
std::string fragment_name(std::uint32_t p, std::uint64_t version);

// Writes <dir>/fragment_name(...) atomically (files::write_atomic_parts, or
// sealed) and says what a manifest names it by: the errors of the write,
// naming the file.
result<fragment_file> save_fragment(const std::string& dir, const fragment_source& f);

// What one fragment's file holds, read and checked.
struct fragment_read {
  fragment_values values;  // with_values only
  std::vector<std::pair<std::string, std::int64_t>> last_round;  // (site, its last round of p inside a step)
  std::optional<held_update> held;  // its payload null unless with_values or with_held
  double theta_norm = 0;            // NaN: a file written before the header kept it
};
struct fragment_want {
  bool values = true;  // θ_p, m_p, e_p
  bool held = true;    // the held update's payload
};

// Reads the file `entry` names in `dir` (fragment entry.fragment of job `job`
// under `plan`; `momentum`: whether the job keeps m). It must be the file the
// manifest names (size, SHA-256, computed as it is read) and its header must
// agree (job, fragment, version, counts). Keeps only what `want` asks for; the
// rest is hashed and dropped. `reuse`: buffers to read the values into (a
// fragment that left memory: its pages are already there to fill). A missing
// or wrong file is corruption naming the file and the job.
result<fragment_read> read_fragment(const std::string& dir, const fragment_file& entry,
                                    const diloco::fragment_plan& plan, const std::string& job, bool momentum,
                                    fragment_want want = {}, fragment_values reuse = {});

// A held update read back (either format): the saved fields, its payload and
// what the payload says of itself (element count, SHA-256). corruption
// (`where` naming the file) when the payload is not a codec payload.
result<held_update> held_from(const std::string& where, const std::string& job, std::uint32_t fragment,
                              std::uint64_t version, std::uint64_t round, std::uint32_t contributors,
                              std::string codec, std::string payload);

}  // namespace loom::aggregator
