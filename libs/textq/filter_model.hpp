// filter_model: everything a trained text filter is — the GPT's shape and
// weights, the tokenizer kind, the scoring window, the quality head, the
// perplexity bucket thresholds and the embedding centre — and its one-file
// format (header, body, SHA-256 trailer). A plain value: immutable once
// trained, so any number of scorers on any threads may share one (const).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"
#include "libs/textq/tokens.hpp"

namespace loom::textq {

// CCNet's buckets over perplexity: head (most like the reference corpus),
// middle, tail (least like it).
enum class ppl_bucket : std::uint8_t { head, middle, tail };
std::string_view to_string(ppl_bucket b);

struct filter_model {
  model::gpt2_config config;  // V = byte_vocab, Vp = byte_padded_vocab
  tokenizer_kind tokenizer = tokenizer_kind::bytes;
  int window = 128;           // T: tokens per scoring window, <= config.max_seq_len
  std::vector<float> params;  // the GPT's parameters, model::param_layout order

  // Perplexity (per byte token) cut points from held-out reference text:
  // ppl <= head_max is head, <= middle_max middle, above is tail.
  float head_max = 0;
  float middle_max = 0;

  // P(good) = sigmoid(quality_w · pooled + quality_b); pooled = the mean over
  // tokens of ln_f's output (C). Without labels at training: all zero (0.5).
  bool has_quality_head = false;
  std::vector<float> quality_w;  // C
  float quality_b = 0;
  float quality_threshold = 0.5f;

  // Subtracted from each word-end state before pooling into an embedding:
  // the reference corpus's mean word-end state at each window position. Every text of the
  // reference's style shares it (uncentred, any two documents sit near cosine
  // 1), and the positional part differs with where a text's last window ends.
  std::vector<float> embed_center;  // window × C

  ppl_bucket bucket_of(double perplexity) const {
    return perplexity <= head_max ? ppl_bucket::head : perplexity <= middle_max ? ppl_bucket::middle : ppl_bucket::tail;
  }
  // invalid_argument naming the first inconsistent field.
  status validate() const;
};

// The file: little-endian, in this order
//   "LOOMTQF\0"  u32 version (1)  u32 tokenizer  i32 L NH C maxT V Vp window
//   u32 has_quality_head  f32 head_max middle_max quality_b quality_threshold
//   u64 n_params  f32 params[n_params]  f32 quality_w[C]  f32 embed_center[window·C]
//   SHA-256 of every byte before it (32)
std::string serialize(const filter_model& m);
// `name` only names the source in errors: invalid_argument for a foreign file
// (magic) or a version this build does not read; corruption for a truncated
// file, a checksum mismatch or inconsistent fields.
result<filter_model> parse(std::string_view bytes, const std::string& name);

// Atomic write (libs/files). Errors name the path.
status save(const filter_model& m, const std::string& path);
// not_found, permission_denied, or parse's errors, each naming the path.
result<filter_model> load(const std::string& path);

}  // namespace loom::textq
