// schema: every key a run spec may hold — each section's keys, the stage's
// `kind`, and an hpo stage's [hpo] table — with the kind of value it takes.
// Path-ness is a property of the key here, not of the code that reads it:
// the run-config reader refuses to read a key as a kind the schema does not
// give it, it records every `path` value it reads (run_config::input_paths),
// and one rule (input_files.hpp) judges every one of them, wherever it sits,
// by the kind of file the key names:
//
//   file kind      keys                                   read as            cap
//   text           data.text                              a regular file     1 GiB
//   held_out_text  hpo.validation                         a regular file     16 MiB
//   jsonl          data.sft data.prefs                    a regular file     256 MiB
//   tokenizer      data.tokenizer (or the word "bytes")   a regular file     64 MiB
//   shards         data.shards                            a directory        (per shard, by its manifest)
//   snapshot       model.init_from align.reference        a directory        (per file, by its manifest)
//                  reward.model
//   output         output.dir                             written, never read; in a job the scheduler names it
//
// The caps' reasons are in file_rule::why. Pure data; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::runspec {

enum class value_kind {
  integer,
  real,
  boolean,
  word,              // a string that is one of a few words or a pattern (format, codec, regex): never a file
  name,              // a dataset's or a site's name: refused where it holds '/'
  words,             // an array of word
  names,             // an array of name
  integer_or_names,  // diloco.sites: a count, or the sites by name
  path,              // a file or directory a service reads (or a run writes): file_kind says which
  table,             // hpo.space: libs/hpo's
};

enum class file_kind { none, text, held_out_text, jsonl, tokenizer, shards, snapshot, output };

struct file_rule {
  file_kind kind = file_kind::none;
  std::string_view what;        // "a text file", for messages
  bool directory = false;       // the key names a directory (else a regular file)
  bool read = true;             // false: written (output.dir), never opened for reading
  std::uint64_t max_bytes = 0;  // a regular file's cap; 0 for directories
  std::string_view why;         // why the cap (or why a directory has none)
};

struct key_spec {
  std::string_view section;  // "" for the top-level `kind`
  std::string_view key;
  value_kind kind = value_kind::word;
  file_kind file = file_kind::none;  // for value_kind::path
  std::string_view word_instead;     // a path key that also takes this word ("bytes")

  constexpr key_spec(std::string_view s, std::string_view k, value_kind v, file_kind f = file_kind::none,
                     std::string_view word = {})
      : section(s), key(k), kind(v), file(f), word_instead(word) {}
};

// Every key, section by section, in the order the reader reads them.
const std::vector<key_spec>& schema();
// The spec of section.key; nullptr when the key is not in the schema.
const key_spec* find_key(std::string_view section, std::string_view key);
// The same by dotted name ("data.text", "kind").
const key_spec* find_key(std::string_view dotted);
const file_rule& rule_of(file_kind kind);

}  // namespace loom::runspec
