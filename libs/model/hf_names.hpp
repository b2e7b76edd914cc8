// hf_names: our parameter layout in Hugging Face's GPT-2 naming
// (GPT2LMHeadModel's state dict): which of our tensors, for which layer, each
// HF tensor is, its HF shape, and copies between our buffer and HF tensors.
// HF's attention and MLP weights are Conv1D, stored (in, out): the transpose
// of ours (out, in). HF's wte has the real vocabulary's rows only (our padding
// rows are dropped on the way out, zero on the way in); lm_head is tied to wte
// and not a tensor of its own. Export and import use this; plain functions.
#pragma once

#include "libs/model/gpt_config.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::model {

struct hf_tensor {
  std::string name;                  // e.g. "transformer.h.3.attn.c_attn.weight"
  tensor_id id = tensor_id::wte;     // which of ours
  int layer = -1;                    // its layer; -1 for wte, wpe, ln_f
  std::vector<std::uint64_t> shape;  // HF's shape
  bool transposed = false;           // HF holds (in, out) of our (out, in)

  std::uint64_t count() const;
};

// Every tensor of HF's GPT-2 for this config, in HF's state-dict order
// (wte, wpe, h.0 ... h.L-1, ln_f).
std::vector<hf_tensor> hf_gpt2_tensors(const gpt2_config& cfg);

// The entry named `name`; nullopt for a name GPT-2 does not have
// (e.g. "lm_head.weight", tied to wte, or attn.bias, HF's causal-mask buffer).
std::optional<hf_tensor> find_hf_tensor(const gpt2_config& cfg, std::string_view name);

// Copies one tensor from our parameter buffer into `out` in HF's layout.
// REQUIRES: params laid out by make_param_layout(cfg); out.size() == t.count().
void copy_to_hf(const gpt2_config& cfg, const hf_tensor& t, std::span<const float> params, std::span<float> out);
// The inverse: writes HF's values into our buffer (wte's padding rows are zeroed).
void copy_from_hf(const gpt2_config& cfg, const hf_tensor& t, std::span<const float> in, std::span<float> params);

}  // namespace loom::model
