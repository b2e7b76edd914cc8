// text_data: turns a plain text file into a token-shard dataset the loader
// reads, so `loom-trainer train` can train on a file without an ingest service.
// The whole file is one document, tokenized with the run's tokenizer (GPT-2,
// or data.tokenizer's tokenizer.json), preceded by <|endoftext|> (GPT-2:
// 50256) as GPT-2's training data is. Cached: re-tokenizes only when the
// file's SHA-256 (or the tokenizer file's) differs from the one recorded
// beside the shards.
// Stateless; one caller per cache directory at a time.
#pragma once

#include "libs/status/status.hpp"
#include "libs/tokenizer/bpe.hpp"

#include <functional>
#include <string>

namespace loom::trainer {

inline constexpr std::uint32_t gpt2_eot = 50256;

// The tokenizer of a run: data.tokenizer's tokenizer.json (`path`), or GPT-2
// when `path` is empty. Errors name data.tokenizer and the file.
result<tokenizer::bpe> load_run_tokenizer(const std::string& path);
// The id of <|endoftext|> in it (GPT-2: 50256); invalid_argument naming
// `path` when the tokenizer has no such special token.
result<std::uint32_t> end_of_text_id(const tokenizer::bpe& b, const std::string& path);
// What identifies the tokenizer in a cache stamp: "" for GPT-2 (so existing
// caches stay valid), else "tokenizer <SHA-256 of the file>".
result<std::string> tokenizer_stamp(const std::string& path);

// Writes (or reuses) shards of `text_path` in `cache_dir`; returns cache_dir.
// not_found when the file or the vocabulary is missing. `tokenizer_path`:
// data.tokenizer ("" = GPT-2; "bytes" = one token per byte, no <|endoftext|>).
result<std::string> prepare_text_dataset(const std::string& text_path, const std::string& cache_dir,
                                         const std::string& tokenizer_path = "");

// The cache both text and SFT preparation use: reads `source`, returns cache_dir
// at once when its manifest exists and the stamp (SHA-256, `kind`, path) matches,
// else runs build(text) to write the shards there and then the stamp.
// `what` ("data.text") names the source in errors.
result<std::string> cached_shards(const std::string& source, const std::string& what, const std::string& kind,
                                  const std::string& cache_dir,
                                  const std::function<status(const std::string& text)>& build);

}  // namespace loom::trainer
