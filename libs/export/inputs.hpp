// What every export takes -- a GPT-2 shape, its fp32 parameters in our
// layout (libs/model: make_param_layout) and its byte-level BPE tokenizer --
// and the checks that they fit together. Pure functions; any thread.
#pragma once

#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"
#include "libs/tokenizer/train/hf_json.hpp"

#include <cstdint>
#include <span>
#include <string_view>

namespace loom::exporter {

// GPT-2's end-of-text token: the exported models' bos and eos.
inline constexpr std::string_view end_of_text = "<|endoftext|>";

// invalid_argument naming the first problem: a bad config, params.size() !=
// make_param_layout(cfg).total, a tokenizer whose size (ordinary + special
// tokens) is not cfg.vocab, a merge naming a token that does not exist, or no
// <|endoftext|> among its special tokens. Returns <|endoftext|>'s id.
result<std::uint32_t> check_inputs(const model::gpt2_config& cfg, std::span<const float> params,
                                   const tokenizer::bpe_spec& tok);

// The slice of one tensor (for one layer; layer -1 for wte, wpe, lnf*) in our
// buffer; for wte only the cfg.vocab real rows (the padding rows are ours).
std::span<const float> tensor_slice(const model::gpt2_config& cfg, std::span<const float> params,
                                    model::tensor_id id, int layer);

}  // namespace loom::exporter
