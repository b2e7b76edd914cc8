// tensor_checks: what `loom model check` asks of a checkpoint's
// model.safetensors before an export — every value finite, every tensor the
// shape its config says — and the parameters gathered into the engine's
// layout for the held-out loss and the exporters. Pure functions on a parsed
// file; any thread. Each problem is one line naming the tensor.
#pragma once

#include "libs/ckpt/safetensors.hpp"
#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"

#include <string>
#include <vector>

namespace loom::modelcheck {

// The model's shape from the file's metadata (snapshot_io writes layers,
// heads, channels, max_seq_len, vocab, padded_vocab); corruption naming the
// missing or malformed key.
result<model::gpt2_config> config_of(const ckpt::safetensors_file& f, const std::string& file);

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

// The parameters in model::make_param_layout(cfg) order (wte with its
// padding rows). REQUIRES: shape_problems(f, cfg) is empty.
std::vector<float> flat_params(const ckpt::safetensors_file& f, const model::gpt2_config& cfg);

}  // namespace loom::modelcheck
