// gpt2_checkpoint: the one owner of a GPT-2 checkpoint's format (ARCHITECTURE.md
// §6) — a signed snapshot (snapshot.hpp) holding model.safetensors (the 16
// parameter tensors of libs/model, F32, with the model's shape in its
// metadata), trainer_state.json (the writer's text, kept as given) and any
// further safetensors files (the trainer's optimizer moments, a reward head).
// The trainer, the aggregator's global export and `loom model check` write
// and read checkpoints only through these functions.
// Stateless functions; one writer per snapshot root at a time (snapshot.hpp).
#pragma once

#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::ckpt {

inline constexpr const char* gpt2_model_file = "model.safetensors";
inline constexpr const char* gpt2_state_file = "trainer_state.json";

// Every shape field in a checkpoint's metadata lies in [1, gpt2_max_dim]:
// the largest any run config accepts (libs/runspec: vocab, padded_vocab), so
// no checkpoint we wrote is refused, and no forged size reaches an allocation.
inline constexpr int gpt2_max_dim = 1 << 24;

// model.safetensors' metadata: format "loom-gpt2" and layers, heads,
// channels, max_seq_len, vocab, padded_vocab as decimal integers.
metadata gpt2_metadata(const model::gpt2_config& c);

// The model's shape from that metadata. corruption naming `file` and the
// field: missing ("<file>: metadata lacks \"heads\""), not a decimal integer
// in [1, gpt2_max_dim], or a shape gpt2_config::validate refuses.
result<model::gpt2_config> gpt2_config_from(const metadata& m, const std::string& file);

// The 16 tensors of a flat θ (make_param_layout(c) order) as views into
// `theta`, for write_safetensors. REQUIRES: theta.size() is the layout's total.
std::vector<tensor_view> gpt2_tensors(const model::gpt2_config& c, std::span<const float> theta);

// Copies the 16 tensors of a parsed model.safetensors into `out` (flat θ in
// make_param_layout(c) order). Each must be F32 of exactly c's shape:
// corruption "<file>: no tensor \"wte\"" when one is missing,
// invalid_argument "<file>: tensor \"qkvw\" is F32[2,48,16], the model needs
// F32[2,96,32]" when one differs; invalid_argument when out is not c's size.
// Metadata is not read: the caller says the shape.
status gpt2_copy_params(const safetensors_file& f, const model::gpt2_config& c, const std::string& file,
                        std::span<float> out);
// The same into a new vector.
result<std::vector<float>> gpt2_flat_params(const safetensors_file& f, const model::gpt2_config& c,
                                            const std::string& file);

// A further safetensors file of a snapshot, signed with the rest.
struct extra_file {
  std::string name;  // a plain file name
  std::vector<tensor_view> tensors;
  metadata meta;
};

// What write_gpt2_snapshot publishes. Views: valid during the call.
struct gpt2_snapshot {
  model::gpt2_config config;
  std::span<const float> params;      // flat θ in make_param_layout(config) order
  std::string_view trainer_state;     // trainer_state.json, byte for byte
  std::span<const extra_file> extras;  // written after model.safetensors, in order
  // Seal every file at rest under these keys (libs/atrest; null: plain),
  // the KEK chosen by the manifest's date (created_unix) for rotation.
  atrest::kek_store* seal = nullptr;
};

// Publishes root/step-<step> (LATEST moves to it) signed with `key`, the
// manifest dated `created_unix`, and returns its path. invalid_argument when
// params is not config's size. Any failed write, fsync or rename fails it
// with LATEST untouched, and the temp directory is removed (no .tmp-step-*
// is left behind).
result<std::string> write_gpt2_snapshot(const std::string& root, std::uint64_t step, const gpt2_snapshot& s,
                                        std::string_view key, std::int64_t created_unix);

// `path` is one step-N directory holding a MANIFEST.json (that one only) or
// a snapshot root (the newest that verifies, falling back past corrupt ones:
// load_latest). not_found when there is none; corruption listing every
// problem ("; "-separated) when the step directory does not verify.
result<loaded_snapshot> open_snapshot_at(const std::string& path, std::string_view key);

// The opened snapshot's model.safetensors, read and validated.
result<safetensors_file> read_gpt2_model(const loaded_snapshot& s);

// Flat θ of the snapshot at `path` (open_snapshot_at), shaped as `c` says.
result<std::vector<float>> read_gpt2_params(const std::string& path, std::string_view key,
                                            const model::gpt2_config& c);

}  // namespace loom::ckpt
