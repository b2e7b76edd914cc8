// held_out: the loss a model gets on text it is checked against before an
// export (`loom model check`, check held_out_loss). Tokens come from a file
// the operator names (--held-out FILE: truly held out) or, by default, from
// the tail of the version's own data source — text the model trained on, so
// a sanity bound (the model learned and is not broken), not a score of how it
// generalises. The loss is the CPU engine's forward over up to
// max_windows windows of T tokens (T = the run's train.seq_len). Free
// functions; one caller at a time (the engine uses every core).
#pragma once

#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom::modelcheck {

// Windows evaluated at most, and tokens scored at most: a forward costs
// about 2 x params x tokens FLOP plus the LM head (a d6 over 1024 tokens:
// ~0.1 TFLOP, 7.6 s on the loaded 2-core dev box; a d12: ~0.3 TFLOP), so a
// d12 check scores 1 window of 1024, a d6 8 of 128, a tiny model 8 of its
// seq_len. One window is held in memory at a time (a d12's logits: 200 MB).
inline constexpr int max_windows = 8;
inline constexpr int max_scored_tokens = 1024;
// Bytes read from the end of a text file: ample for 8 windows of 1024 GPT-2
// tokens (about 4 bytes each), and a 10 GB corpus is not read whole.
inline constexpr std::uint64_t tail_bytes = 256 * 1024;

struct held_out_tokens {
  std::vector<std::uint32_t> ids;
  std::string source;  // what they are, for the report: "the last 64 KiB of text:/x (training data)"
};

// The last tail_bytes of a text file, tokenized with `tokenizer` ("gpt2" or
// a tokenizer.json path); not_found naming the file. With `roots`, the file
// must lie inside one of them (files::open_confined: permission_denied naming
// the path and the roots otherwise, whether it exists or not) and is read
// through the descriptor that check opened; a device or pipe is refused.
result<held_out_tokens> tokens_of_text_tail(const std::string& path, const std::string& tokenizer,
                                            const std::vector<std::string>& roots = {});
// The last `count` tokens of a shard directory (a dataset, data.shards).
result<held_out_tokens> tokens_of_shards_tail(const std::string& dir, std::uint64_t count);

struct scored {
  double loss = 0;           // mean next-token loss
  std::size_t windows = 0;   // B
  std::size_t tokens = 0;    // B x T targets scored
};
// Mean next-token loss of the model over the last windows of `ids`: B =
// min(max_windows, max_scored_tokens / T, (n-1)/T), at least 1, windows of T
// tokens (T shrinks to n-1 for a short text). invalid_argument for fewer than 2 tokens or an id >= vocab;
// unavailable when `stop` is set between two windows.
// REQUIRES: params.size() == make_param_layout(cfg).total.
result<scored> mean_loss(const model::gpt2_config& cfg, std::span<const float> params,
                         std::span<const std::uint32_t> ids, int seq_len, const std::atomic<bool>* stop = nullptr);

}  // namespace loom::modelcheck
