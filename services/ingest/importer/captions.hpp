// Caption pairing for an import's images and audio, found before pass 1 by a
// walk of the source directory that reads names only (and the few caption
// files it finds). Two ways to give a caption or transcript:
//   sidecars  for media file D/N.E: D/N.txt, else D/N.json ("caption", "text"
//             or "transcript" field), else D/N.E.txt (the WebDataset habit);
//   manifest  any *.jsonl whose first record has a string "image" or "audio"
//             field: {"image": "pics/a.jpg", "caption": "..."} per line, the
//             path relative to the manifest's directory.
// A sidecar or manifest is claimed: the text reader skips it, so a caption
// never becomes a training document of its own. Sidecars of files that are
// not media are ordinary text. A source that is a single file or an archive
// has no sidecars (archive members are imported, uncaptioned).
// Plain values; stateless functions on the calling thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace loom::ingest {

struct caption {
  std::string text;  // raw: the importer cleans and redacts it
  std::string from;  // the sidecar or "manifest.jsonl line 12"
};

struct caption_problem {
  std::string file;
  std::uint64_t line = 0;
  std::string rule;    // "caption_too_long", "caption_manifest_bad_line", "caption_target_missing"
  std::string detail;
};

struct caption_index {
  std::map<std::string, caption> by_media;  // key: media_key(path as the reader names it)
  std::set<std::string> claimed;            // paths the text reader must skip (as the walk names them)
  std::vector<caption_problem> problems;
  std::uint64_t sidecars = 0, manifest_lines = 0;
};

struct caption_options {
  std::vector<std::string> roots;               // as reader_options::roots (empty: none)
  bool skip_hidden = true;
  std::uint64_t max_caption_bytes = 64 * 1024;  // one caption; longer: a problem, the media stays uncaptioned
  std::uint64_t max_total_bytes = 64ull << 20;  // all captions held; beyond: problems, uncaptioned
};

// The caption of `media_path` in the index's key form (lexically normal).
std::string media_key(const std::string& media_path);

// Walks `source` (a directory; anything else gives an empty index).
// Errors only for a directory that cannot be listed at the top.
result<caption_index> find_captions(const std::string& source, const caption_options& opt);

// Whether a file name's extension is one the readers treat as image or audio.
bool is_media_name(const std::string& name);

}  // namespace loom::ingest
