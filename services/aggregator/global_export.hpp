// global_export: an edge-site diloco stage's final model into the cloud's data
// dir (issue 15). The stage's model is the aggregator's global θ; the sites'
// own final snapshots hold the same θ but live at the sites, signed with their
// keys. The cloud's stage directory gets it as a checkpoint snapshot in the
// trainer's format (model.safetensors with the GPT-2 tensors and metadata,
// trainer_state.json as member 0 reported it), signed with the cloud's
// checkpoint key, so the model registry and the next stage use it as usual.
// No optimizer moments: a stage after it starts from the parameters only.
// Called by the engine under its lock; plain function.
#pragma once

#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <span>
#include <string>

namespace loom::aggregator {

// Publishes <stage_dir>/checkpoints/step-<step> (LATEST moves to it) and
// returns its path, written by ckpt::write_gpt2_snapshot. stage_dir (the
// grant's) is made if need be and confined to <data_dir>/jobs with
// files::make_confined_dirs (every link resolved, nothing made through one
// that leads out): a path outside it, or leading out, is permission_denied.
// invalid_argument when trainer_state is not a JSON object whose "step" is
// `step`, or θ is not cfg's size. On every failure after the snapshot's temp
// directory is made, it is removed (no .tmp-step-* is left).
result<std::string> write_global_snapshot(const std::string& data_dir, const model::gpt2_config& cfg,
                                          std::span<const float> theta, const std::string& stage_dir,
                                          std::uint64_t step, const std::string& trainer_state);

}  // namespace loom::aggregator
