// text_data: turns a plain text file into a token-shard dataset the loader
// reads, so `loom-trainer train` can train on a file without an ingest service.
// The whole file is one document, GPT-2 tokenized, preceded by <|endoftext|>
// (50256) as GPT-2's training data is. Cached: re-tokenizes only when the
// file's SHA-256 differs from the one recorded beside the shards.
// Stateless; one caller per cache directory at a time.
#pragma once

#include "libs/status/status.hpp"

#include <functional>
#include <string>

namespace loom::trainer {

inline constexpr std::uint32_t gpt2_eot = 50256;

// Writes (or reuses) shards of `text_path` in `cache_dir`; returns cache_dir.
// not_found when the file or the GPT-2 vocabulary is missing.
result<std::string> prepare_text_dataset(const std::string& text_path, const std::string& cache_dir);

// The cache both text and SFT preparation use: reads `source`, returns cache_dir
// at once when its manifest exists and the stamp (SHA-256, `kind`, path) matches,
// else runs build(text) to write the shards there and then the stamp.
// `what` ("data.text") names the source in errors.
result<std::string> cached_shards(const std::string& source, const std::string& what, const std::string& kind,
                                  const std::string& cache_dir,
                                  const std::function<status(const std::string& text)>& build);

}  // namespace loom::trainer
