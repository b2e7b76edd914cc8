// What a kept document becomes in the dataset: its tokens in the shards and, for
// SFT chat records and preference pairs, a line of records.jsonl (importer.hpp
// says how a trainer uses it). output owns the shard writer and that file, and
// counts what went in. Owned by the importing thread.
#pragma once

#include "libs/shards/writer.hpp"
#include "libs/status/status.hpp"
#include "services/ingest/importer/stream_file.hpp"
#include "services/ingest/pipeline/document.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace loom::ingest {

inline constexpr std::string_view records_file_name = "records.jsonl";

// The text an SFT record or preference pair is tokenized as, into `out`:
//   "### User:\n{content}\n\n### Assistant:\n{content}\n\n..." (the trainer's SFT
// template, sft_data.hpp); a preference pair as its prompt and chosen answer.
void render_chat(const document& d, std::string& out);
// The records.jsonl line (without '\n') of an SFT record ({"messages":[...]})
// or preference pair ({"prompt","chosen","rejected"}), into `out`.
void record_json(const document& d, std::string& out);

class output {
 public:
  // Shards of `type` and about `target_bytes` each into `dir`; records.jsonl is
  // created there on the first record. Both are sealed at rest under `seal`
  // when given (the process's sealing keys: on by default); manifest.json
  // stays plain and lists the plaintext's hashes.
  static result<output> create(const std::string& dir, shards::dtype type, std::uint64_t target_bytes,
                               std::shared_ptr<atrest::kek_store> seal = nullptr);

  // One document's tokens; record_json non-empty adds it to records.jsonl.
  status emit(std::span<const std::uint32_t> tokens, std::string_view record_json, std::uint64_t text_bytes);
  // Publishes the last shard and manifest.json (no placement), fsyncs records.jsonl.
  result<shards::manifest> finish();

  shards::dtype type() const { return type_; }
  std::uint64_t documents() const { return documents_; }
  std::uint64_t text_bytes() const { return text_bytes_; }
  std::uint64_t records() const { return records_; }

 private:
  output(shards::shard_writer w, std::string dir, shards::dtype t, std::shared_ptr<atrest::kek_store> seal)
      : seal_(std::move(seal)), writer_(std::move(w)), dir_(std::move(dir)), type_(t) {}
  std::shared_ptr<atrest::kek_store> seal_;  // the writer holds its raw pointer
  shards::shard_writer writer_;
  std::string dir_;
  shards::dtype type_;
  std::optional<out_stream> records_file_;
  std::uint64_t documents_ = 0, text_bytes_ = 0, records_ = 0;
};

}  // namespace loom::ingest
