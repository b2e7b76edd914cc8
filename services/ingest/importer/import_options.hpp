// What one import is asked to do (import_options), its validation, and how the
// memory budget is shared between the parts that hold memory (budget_plan).
// Plain values; the caller owns them. The progress callback and the stop flag
// are used from the importing thread only.
#pragma once

#include "libs/status/status.hpp"
#include "services/ingest/pipeline/filters/licence.hpp"
#include "services/ingest/pipeline/readers/reader.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::textq {
struct filter_policy;  // libs/textq/policy.hpp
}

namespace loom::ingest {

// Where an import stands; handed to import_options::progress.
struct import_progress {
  std::string phase;  // "read" (pass 1), "write" (pass 2: dedup verdicts, shards), "publish", "done"
  std::uint64_t files = 0;
  std::uint64_t bytes_read = 0;  // text bytes of documents read so far (decoded; exact at "done")
  std::uint64_t documents = 0;
  std::uint64_t kept = 0;  // passed every check (duplicates are subtracted in "write")
  std::uint64_t rejected = 0, quarantined = 0;
  std::uint64_t duplicates = 0;
  double elapsed_s = 0;
};

struct import_options {
  std::string source;         // file, directory or archive to import
  std::string dataset;        // [A-Za-z0-9._-]{1,64}, not starting with '.'
  std::string datasets_root;  // dataset D is published as <datasets_root>/D/
  std::string profile = "default";  // pipeline/filters/profile.hpp: default, web, code, minimal
  licence_policy licences;          // report (default) or a deny list
  reader_options reader;            // format hints: JSONL text field, CSV column, text split...
  bool pii = true;                  // redact PII to typed placeholders ("<EMAIL>")
  std::string pii_phone_region = "US";
  bool dedup = true;                // exact + near duplicates (libs/dedup)
  bool near_dedup = true;           // false: exact only (when dedup is on)
  // Images and audio (png jpg jpeg webp gif; wav flac ogg mp3) into media tars,
  // with captions from sidecars or a JSONL manifest (captions.hpp). false: they
  // are refused as unknown_format, as before.
  bool media = true;
  // A learned image filter (`loom data train-filter --kind image`, libs/vision):
  // images it labels blank, blurred, corrupted or mostly text are refused by
  // that label. "" = none.
  std::string image_filter;
  // A learned text filter (`loom data train-filter --kind text`, libs/textq):
  // perplexity buckets, a quality classifier and semantic dedup, as the model
  // file holds them. "" = none.
  std::string text_filter;
  // Bounds the dedup index in memory (it spills beyond its share), the shard
  // being written and the document in flight: see budget_plan. At least 16 MiB.
  std::uint64_t memory_budget = std::uint64_t{1} << 30;
  std::vector<std::string> nodes = {"local"};  // shard placement (libs/shards/placement.hpp)
  double placement_load_factor = 1.05;
  std::uint64_t shard_target_bytes = std::uint64_t{16} << 20;
  // GPT-2 vocabulary (tiktoken's gpt2.json); "" = $LOOM_GPT2_VOCAB or the
  // installed /usr/local/share/edgeloom/gpt2.json (tokenizer::bpe::load_gpt2).
  std::string vocab_path;
  // Called from the importing thread at most every progress_interval_ms, and
  // besides once as each later phase begins and once at the end (phase "done").
  std::function<void(const import_progress&)> progress;
  int progress_interval_ms = 100;
  // Polled between documents; true aborts: nothing is published and the previous
  // version of the dataset stays as it was.
  const std::atomic<bool>* stop = nullptr;
};

// What a profile asks of a learned text filter (libs/textq/policy.hpp):
//   default, web  perplexity head + middle kept (the tail, the least like the
//                 reference corpus, dropped), the quality head, semantic dedup
//   code          semantic dedup only: a prose model says nothing of code
//   minimal       semantic dedup only
textq::filter_policy text_filter_policy_for(std::string_view profile);

// invalid_argument naming the rule when `name` is not 1..64 of [A-Za-z0-9._-]
// or starts with '.' (dot names are the importer's own: .staging).
status validate_dataset_name(std::string_view name);

// Everything a caller can get wrong before any work starts (name, root, budget,
// nodes, profile, shard size); not whether the source exists.
status validate(const import_options& o);

// "512MiB", "1GiB", "64M", "1000000" (bytes). K/M/G/T and KiB/MiB/GiB/TiB are
// powers of 1024, KB/MB/GB/TB powers of 1000. invalid_argument otherwise.
result<std::uint64_t> parse_byte_size(std::string_view text);

// How the budget B is shared. Worst cases, in bytes:
//   dedup index       B/2          (libs/dedup spills its records beyond it)
//   shard in flight   2 x shard    (the writer's token buffer + the file image it
//                                   hashes); shard = min(shard_target_bytes, B/8)
//   document          ~10 x doc    (reader line, text, cleaning scratch, PII copy,
//                                   fingerprint buffer, token ids); doc = B/64,
//                                   at most reader_options' own limits
//   spill I/O         2 MiB        (pass-1 writer, pass-2 reader)
//   media tar         B/16         (the open media tar; at most 16 MiB)
//   media file        B/16 + B/16  (the file's bytes, at most 64 MiB; its decode:
//                                   pixels <= B/16 / 4 bytes, audio seconds so
//                                   that the 16 kHz samples fit; never in flight
//                                   with a document, so inside its share)
// which sums to about 0.99 B. Not counted: the process itself (code, the GPT-2
// tables, ICU and libphonenumber data, the BPE piece cache): see the README.
struct budget_plan {
  std::uint64_t dedup_bytes = 0;
  std::uint64_t shard_target_bytes = 0;
  std::uint64_t max_document_bytes = 0;  // also the longest line/record read
  std::uint64_t media_tar_bytes = 0;     // target size of a media tar
  std::uint64_t media_file_bytes = 0;    // the largest image or audio file read
  std::uint64_t media_pixels = 0;        // the largest image decoded (width x height)
  double media_seconds = 0;              // the longest audio decoded
};
budget_plan plan_budget(const import_options& o);

}  // namespace loom::ingest
