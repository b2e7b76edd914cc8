// preference_data: preference pairs {"prompt","chosen","rejected"} — read from
// JSONL (data.format = "preference"), rendered to token ids, and packed into
// the (B,T) batches the reward model and DPO take. A batch of P pairs has
// 2P rows: chosen responses in rows [0,P), the rejected ones in [P,2P).
// Row layout: inputs = prompt ++ response (padded with 0 to T), targets the
// inputs shifted by one, mask 1 on the targets that are response tokens,
// last = the index of the row's last real token (where a reward is read).
// Plain values; stateless functions, any thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::align {

struct preference_record {
  std::string prompt, chosen, rejected;
};

// Records of a JSONL file, one object per line (blank lines skipped); a line
// that is not an object or lacks a string "prompt", "chosen" or "rejected" is
// invalid_argument "<origin>:<line>: ... \"<field>\"".
result<std::vector<preference_record>> preferences_from_jsonl(std::string_view jsonl, const std::string& origin);
// The records of a JSONL file on disk (not_found naming a missing file; then
// as preferences_from_jsonl, errors naming the path and line).
result<std::vector<preference_record>> read_preferences(const std::string& path);
// One JSON object per line, the inverse of preferences_from_jsonl.
std::string preferences_to_jsonl(std::span<const preference_record> records);

using encode_fn = std::function<std::vector<std::int32_t>(std::string_view)>;

// How a pair is rendered before tokenising. The defaults are the SFT chat
// format (services/trainer/run/sft_data.hpp), so DPO scores what SFT trained.
struct render_options {
  std::string prompt_prefix = "### User:\n";
  std::string response_prefix = "\n\n### Assistant:\n";  // part of the prompt: not scored
  std::int32_t end_token = -1;  // appended to each response (e.g. <|endoftext|>); < 0: none
};

struct pair_tokens {
  std::vector<std::int32_t> prompt, chosen, rejected;
};
pair_tokens render_pair(const preference_record& r, const encode_fn& encode, const render_options& o = {});

struct pair_batch {
  int pairs = 0, seq_len = 0;  // rows = 2·pairs
  std::vector<std::int32_t> inputs, targets;  // (2P, T)
  std::vector<float> mask;                    // (2P, T)
  std::vector<int> last;                      // (2P)
};

// Packs pairs into a batch of seq_len. A sequence longer than seq_len loses
// the start of its prompt (at least one prompt token is kept), then the end
// of its response. invalid_argument for no pairs, seq_len < 3, an empty
// prompt or response.
result<pair_batch> make_pair_batch(std::span<const pair_tokens> pairs, int seq_len);

// Byte-level tokens (vocab 256): what the tiny in-process models use.
std::vector<std::int32_t> encode_bytes(std::string_view s);

}  // namespace loom::align
