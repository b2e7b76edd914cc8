// gpt2_config: the shape of a GPT-2 model, and param_layout: where each of its
// 16 parameter tensors lives in the one contiguous fp32 buffer (llm.c order,
// each tensor layer-major). Shared by the trainer's engine, snapshots, the
// scheduler's memory estimate and (next) the aggregator and export, so no
// service owns it. Plain values; safe to share read-only across threads.
#pragma once

#include <array>
#include <cstdint>
#include <cstddef>
#include <string_view>
#include <vector>

#include "libs/status/status.hpp"

namespace loom::model {

struct gpt2_config {
  int layers = 12;          // L
  int heads = 12;           // NH; channels % heads == 0
  int channels = 768;       // C
  int max_seq_len = 1024;   // maxT: rows of the position table
  int vocab = 50257;        // V: real tokens
  int padded_vocab = 50304; // Vp >= V: rows of wte; padding rows stay zero

  // invalid_argument naming the first bad field.
  status validate() const;
};

// The 16 tensors, in buffer order. Shapes (L = layers, C = channels):
//   wte (Vp,C)  wpe (maxT,C)  ln1w/ln1b (L,C)  qkvw (L,3C,C) qkvb (L,3C)
//   attprojw (L,C,C) attprojb (L,C)  ln2w/ln2b (L,C)  fcw (L,4C,C) fcb (L,4C)
//   fcprojw (L,C,4C) fcprojb (L,C)  lnfw/lnfb (C)
// Linear weights are (out, in) row-major.
enum class tensor_id : int {
  wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb,
  ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb,
};
inline constexpr int num_tensors = 16;

std::string_view tensor_name(tensor_id t);
// The tensor's shape as listed above, e.g. qkvw -> {L, 3C, C}.
std::vector<std::uint64_t> tensor_shape(const gpt2_config& c, tensor_id t);
// True for the 2-D matrices (wte, wpe, qkvw, attprojw, fcw, fcprojw): the
// tensors AdamW decays. Biases and LayerNorm parameters are not decayed.
bool tensor_decays(tensor_id t);

// A contiguous run of parameters and whether weight decay applies to it.
struct param_range {
  std::size_t offset = 0;
  std::size_t count = 0;
  bool decay = false;
};

struct param_layout {
  std::array<std::size_t, num_tensors> sizes{};
  std::array<std::size_t, num_tensors> offsets{};
  std::size_t total = 0;

  std::size_t size(tensor_id t) const { return sizes[static_cast<int>(t)]; }
  std::size_t offset(tensor_id t) const { return offsets[static_cast<int>(t)]; }
  // One range per tensor, in buffer order, with tensor_decays() as the flag.
  std::vector<param_range> ranges() const;
};

// REQUIRES: cfg.validate().ok().
param_layout make_param_layout(const gpt2_config& cfg);

// Typed pointers into a parameter (or gradient) buffer laid out by param_layout.
struct tensor_views {
  float* wte; float* wpe; float* ln1w; float* ln1b; float* qkvw; float* qkvb;
  float* attprojw; float* attprojb; float* ln2w; float* ln2b; float* fcw; float* fcb;
  float* fcprojw; float* fcprojb; float* lnfw; float* lnfb;
};
tensor_views make_views(float* base, const param_layout& layout);

}  // namespace loom::model
