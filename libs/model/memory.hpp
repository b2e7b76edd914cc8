// memory: how many bytes one trainer needs to train a GPT-2 model of a given
// shape on the CPU engine — parameters, gradients, AdamW moments, the
// activations forward saves for backward, backward's scratch and the step's
// token buffers. The scheduler checks it at submit and placement against a
// node's memory; the trainer checks it before it allocates. Pure arithmetic;
// the engine's own allocation is checked against it by the engine's tests.
#pragma once

#include "libs/model/gpt_config.hpp"

#include <cstdint>
#include <string>

namespace loom::model {

// fp32 values the engine allocates for one (B, T) shape: `acts` saved by
// forward for backward (L-deep), `scratch` reused by backward layer by layer.
struct activation_floats {
  std::uint64_t acts = 0, scratch = 0;
};
activation_floats activations(const gpt2_config& cfg, std::uint64_t batch, std::uint64_t seq_len);

// What a model with bf16 matmuls holds instead (gpt2::set_precision, issue
// 28): `fp32_dropped` of the fp32 activations are not kept (both LayerNorms'
// and attention's outputs, GELU's output, attention's probabilities); bf16
// values are: the parameters' copy, those activations but GELU's, the
// matmuls' two scratch buffers and attention's scratch.
struct bf16_values {
  std::uint64_t fp32_dropped = 0;  // fp32 values of activations() not allocated
  std::uint64_t params = 0, acts = 0, scratch = 0;  // bf16 values
  std::uint64_t attention16 = 0, attention32 = 0;    // bf16_attention's scratch: bf16 and fp32 values
  std::uint64_t bytes() const { return 2 * (params + acts + scratch + attention16) + 4 * attention32; }
};
bf16_values bf16_layout(const gpt2_config& cfg, std::uint64_t batch, std::uint64_t seq_len);

// Bytes of one training process, by part.
struct training_memory {
  std::uint64_t params = 0;       // fp32 parameters
  std::uint64_t grads = 0;        // fp32 gradients
  std::uint64_t optimizer = 0;    // AdamW m and v
  std::uint64_t activations = 0;  // acts + scratch + the model's token buffers
  std::uint64_t bf16 = 0;         // bf16 matmuls: the parameters' bf16 copy, bf16 activations and scratch
  std::uint64_t batches = 0;      // the step's micro-batches held by the training loop
  std::uint64_t overhead = 0;     // the process itself: runtime, libraries, data loader

  std::uint64_t total() const { return params + grads + optimizer + activations + bf16 + batches + overhead; }
  // "1.93 GiB (parameters 0.46, gradients 0.46, AdamW 0.93, activations 0.07, ...)"
  std::string describe() const;
};

// What the process resident outside the model weighs (measured: an idle
// trainer service with the engine loaded, ~60 MiB, rounded up).
inline constexpr std::uint64_t process_overhead_bytes = 128ull << 20;

// micro_batches: how many micro-batches of the step one member holds
// (train.grad_accum, divided over a data-parallel group); sft adds the
// per-token loss weights. may_bf16 (train.precision bf16 or auto: the
// machine decides): the larger of the fp32 and the bf16 layouts, so the
// answer holds wherever the run lands. REQUIRES: cfg.validate().ok().
training_memory estimate_training(const gpt2_config& cfg, std::uint64_t batch, std::uint64_t seq_len,
                                  std::uint64_t micro_batches, bool sft, bool may_bf16 = false);

// "512 MiB", "1.50 GiB": bytes for people.
std::string format_bytes(std::uint64_t bytes);

}  // namespace loom::model
