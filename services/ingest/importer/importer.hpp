// The ingest importer: one call turns a source path into a published dataset.
//
//   pass 1  read (pipeline/readers) -> clean -> PII redaction -> quality -> licence
//           -> annotation -> kept: fingerprint into the dedup index, GPT-2 tokens
//           spilled to disk in input order
//   pass 2  dedup verdicts (drop every copy but the first in input order) ->
//           surviving tokens into 16 MiB shards (libs/shards), records.jsonl
//   media   images and audio met in pass 1 (media_items.hpp): validated, stripped,
//           normalised, deduplicated, captioned (captions.hpp) -> media tars
//           (media_output.hpp), listed in the manifest's "media" array
//   publish placement (libs/shards/placement) -> manifest.json, report.json,
//           rejects.jsonl -> atomic swap into <root>/<name> (staging.hpp)
//
// Each document in the shards is <|endoftext|> (50256) followed by its tokens,
// as services/trainer/run/text_data does. SFT chat records are rendered as the
// trainer's SFT template ("### User:\n...\n\n### Assistant:\n...\n\n"),
// preference pairs as their prompt and chosen answer in the same template: the
// shards are a plain LM stream. For SFT training the dataset also holds
// records.jsonl with the validated, cleaned, redacted and deduplicated records
// ({"messages":[...]} lines, and {"prompt","chosen","rejected"} lines for
// preference pairs); a trainer run uses it with data.sft = <root>/<name>/records.jsonl
// and data.format = "sft" (sft_data.hpp tokenizes it with the loss mask).
//
// Errors: a bad option or dataset name (invalid_argument), a missing source
// (not_found), another import of the same name running (conflict), disk errors
// (resource_exhausted for a full disk), the stop flag (unavailable: nothing was
// published). A file that cannot be read is a reason-coded line in rejects.jsonl,
// not an error. On any error the previous version of the dataset is untouched.
//
// Single-threaded: everything runs on the calling thread (a service calls it from
// a worker thread). Memory: bounded by options.memory_budget plus the fixed cost
// of the process (import_options.hpp: budget_plan; README.md: measured figures).
#pragma once

#include "libs/pii/pii.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/status/status.hpp"
#include "services/ingest/importer/import_options.hpp"
#include "services/ingest/importer/output.hpp"
#include "services/ingest/importer/rejects.hpp"
#include "services/ingest/pipeline/report.hpp"

#include <cstdint>
#include <map>
#include <string>

namespace loom::ingest {

inline constexpr std::string_view report_file_name = "report.json";
// records_file_name: output.hpp; rejects_file_name: rejects.hpp.

struct dedup_figures {
  std::uint64_t documents = 0;  // fingerprinted (kept by the checks)
  std::uint64_t exact = 0, near = 0;
  std::uint64_t clusters = 0, candidate_pairs = 0, confirmed_pairs = 0;
  std::uint64_t runs_spilled = 0, bytes_spilled = 0;
};

// Images and audio (media_items.hpp, media_output.hpp).
struct media_figures {
  std::uint64_t seen = 0;                   // media files the readers handed over
  std::uint64_t images = 0, audio = 0;      // kept, by kind
  std::uint64_t rejected = 0;               // refused (by reason below)
  std::map<std::string, std::uint64_t> rejected_by_reason;  // "truncated", "bomb", "too_small", ...
  std::uint64_t exact_duplicates = 0, near_duplicates = 0;
  std::uint64_t semantic_duplicates = 0;    // by the learned filter's embedding (pHash saw none)
  std::uint64_t captioned = 0;              // kept records with a caption or transcript
  std::uint64_t caption_problems = 0;       // sidecar / manifest lines that could not be used
  std::map<std::string, std::uint64_t> stripped;  // "exif_gps" -> files it was removed from, ...
  std::uint64_t source_bytes = 0, stored_bytes = 0;
};

struct import_summary {
  std::string dataset, import_id;
  std::string dir;          // <root>/<name>
  std::string report_path;  // <dir>/report.json
  std::uint64_t files = 0, bytes_read = 0;  // decoded bytes the readers looked at
  std::uint64_t documents = 0;              // entered the pipeline
  std::uint64_t kept = 0;                   // in the dataset (after dedup)
  std::uint64_t rejected = 0, quarantined = 0, reader_rejections = 0;
  dedup_figures dedup;
  media_figures media;
  pii::type_counts pii{};  // items redacted, by pii_type
  std::uint64_t documents_with_pii = 0;
  std::uint64_t bytes_kept = 0;  // text bytes of the documents in the dataset
  std::uint64_t tokens = 0;      // including one <|endoftext|> per document
  std::uint64_t records = 0;     // lines of records.jsonl (0: no file)
  std::uint64_t rejects = 0;     // lines of rejects.jsonl
  double seconds = 0;
  double mb_per_s = 0;  // bytes_read / seconds / 1e6
  std::uint64_t peak_rss_bytes = 0;  // of the whole process, since it started
  shards::manifest manifest;
  import_report pipeline;  // the pipeline's own counters and first problems
};

result<import_summary> import_dataset(const import_options& opt);

// The summary as report.json (also written into the dataset).
std::string report_json(const import_summary& s, const import_options& opt);
// The summary in a few lines for people.
std::string summary_text(const import_summary& s);

}  // namespace loom::ingest
