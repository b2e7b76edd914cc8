// sft_data: supervised fine-tuning records turned into token shards whose loss
// mask rides in the tokens: dtype uint32, bit 31 set = "not a target" (the
// prompt), so the shard format, loader and checkpoint cursor stay unchanged.
// A record renders as
//   ### User:\n{content}\n\n### Assistant:\n{content}\n\n ... <|endoftext|>
// where only the assistant's contents and the final <|endoftext|> are targets.
// Records come from a JSONL file ({"messages":[{"role","content"}…]}, roles
// system/user/assistant; or a preference pair {"prompt","chosen","rejected"},
// trained on as user = prompt, assistant = chosen) or are generated from a
// plain text: each pair of
// consecutive paragraphs (blank-line separated, ≥ 20 characters) becomes
// user = "Continue the text:\n" + the first, assistant = the second.
// Stateless; one caller per cache directory at a time.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::trainer {

inline constexpr std::uint32_t sft_masked_bit = 0x80000000u;

struct chat_turn {
  std::string role;  // system, user, assistant
  std::string content;
};
using chat_record = std::vector<chat_turn>;

// Records from paragraph pairs of `text`.
std::vector<chat_record> records_from_text(std::string_view text);
// Records of a JSONL file; invalid_argument naming the file and line of the first bad record.
result<std::vector<chat_record>> records_from_jsonl(std::string_view jsonl, const std::string& origin);

// Writes (or reuses, keyed by the source's SHA-256) masked uint32 shards of the
// records from `source` (text when from_text, else JSONL) into cache_dir,
// tokenized with data.tokenizer's tokenizer.json (`tokenizer_path`; "" = GPT-2).
result<std::string> prepare_sft_dataset(const std::string& source, bool from_text, const std::string& cache_dir,
                                        const std::string& tokenizer_path = "");

// SFT data from an imported dataset (ingest's output in `dataset_dir`): its
// records.jsonl when the import held chat records or preference pairs, else
// paragraph-pair records generated from each of its documents (GPT-2 tokens
// decoded back to text; a pair never spans two documents), written to
// cache_dir + ".records.jsonl". Then as prepare_sft_dataset.
result<std::string> prepare_sft_from_dataset(const std::string& dataset_dir, const std::string& cache_dir,
                                             const std::string& tokenizer_path = "");

}  // namespace loom::trainer
