// tensor_checks: what `loom model check` asks of a checkpoint's
// model.safetensors before an export — every value finite, every tensor the
// shape its config says. (The shape from its metadata and the parameters as
// flat θ come from libs/ckpt/gpt2_checkpoint.) Pure functions on a parsed
// file; any thread. Each problem is one line naming the tensor.
#pragma once

#include "libs/ckpt/safetensors.hpp"
#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"

#include <string>
#include <vector>

namespace loom::modelcheck {

// Every F32 tensor scanned: one line per tensor holding a NaN or an infinity,
// naming it, the first bad flat index, its value and how many there are, e.g.
// "tensor qkvw: NaN at index 117 (3 non-finite values)". Empty = all finite.
std::vector<std::string> non_finite(const ckpt::safetensors_file& f);

// Every way the file disagrees with `cfg`: a tensor missing, of another
// dtype or shape (as model::tensor_shape gives it), or one the model does
// not have. Empty = consistent.
std::vector<std::string> shape_problems(const ckpt::safetensors_file& f, const model::gpt2_config& cfg);

// Every field in which two configs differ, as "layers 2 (checkpoint) vs 4 (config)".
std::vector<std::string> config_differences(const model::gpt2_config& checkpoint, const model::gpt2_config& config);

}  // namespace loom::modelcheck
