// The pass-1 spill: every document that passed the checks, already tokenized,
// waits on disk (in the import's work directory) until dedup's verdicts exist;
// pass 2 reads it back in the same order and drops the duplicates. Tokenizing
// once in pass 1 and spilling ids (2 bytes each for GPT-2, ~0.65 byte per text
// byte) is cheaper than reading and cleaning the source twice, and holds no
// more than one document in memory.
//
// Record: a 48-byte header (doc id, line, text bytes, counts, kind), the token
// ids in the shard's width, then the records.jsonl line (SFT/preference only).
// Host byte order: the file never outlives the import that wrote it.
// Sealed at rest like the dataset it becomes (the process's keys; the
// documents' tokens and records are the data itself): written through a
// sealed out_stream, read back one verified chunk at a time.
// Each object is owned by the importing thread.
#pragma once

#include "libs/atrest/sealed.hpp"
#include "libs/shards/format.hpp"
#include "libs/status/status.hpp"
#include "services/ingest/importer/stream_file.hpp"
#include "services/ingest/pipeline/document.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::ingest {

struct spill_meta {
  std::uint64_t file = 0;    // index of its source among the sources with kept documents
  std::uint64_t record = 0;  // document::record
  std::uint64_t line = 0;    // document::line
  std::uint64_t text_bytes = 0;
  doc_kind kind = doc_kind::text;
};

struct spilled_doc {
  spill_meta meta;
  std::vector<std::uint32_t> tokens;
  std::string record_json;  // "" for text documents
};

class spill_writer {
 public:
  // `seal`: the spill is sealed under it (null: plain).
  static result<spill_writer> create(const std::string& path, shards::dtype width,
                                     std::shared_ptr<atrest::kek_store> seal = nullptr);
  // REQUIRES: ids fit the width.
  status write(const spill_meta& meta, std::span<const std::uint32_t> tokens, std::string_view record_json);
  status finish();  // flushes and closes (no fsync: scratch)
  std::uint64_t bytes() const { return out_.bytes_written(); }
  const std::string& path() const { return out_.path(); }

 private:
  spill_writer(out_stream o, shards::dtype w) : out_(std::move(o)), width_(w) {}
  out_stream out_;
  shards::dtype width_;
  std::string scratch_;
};

class spill_reader {
 public:
  // `keys`: the spill was sealed (its writer's keys); null: plain.
  static result<spill_reader> open(const std::string& path, shards::dtype width, atrest::kek_store* keys = nullptr);
  spill_reader(spill_reader&&) noexcept;
  spill_reader& operator=(spill_reader&&) noexcept;
  ~spill_reader();
  // The next record into `d` (reusing its buffers): true; end: false.
  result<bool> next(spilled_doc& d);

 private:
  spill_reader(shards::dtype w) : width_(w) {}
  // Fills out[0, n): true; a clean end before the first byte: false; else corruption.
  result<bool> read(void* out, std::size_t n);
  std::optional<in_stream> in_;                   // a plain spill
  std::unique_ptr<atrest::sealed_reader> sealed_; // a sealed one
  std::string path_;
  shards::dtype width_;
  std::vector<std::uint16_t> narrow_;
};

}  // namespace loom::ingest
