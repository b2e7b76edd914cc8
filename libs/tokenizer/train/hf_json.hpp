// hf_json: byte-level BPE tokenizers in the Hugging Face `tokenizers` format
// (tokenizer.json, version "1.0"): written for trained vocabularies and for
// GPT-2's, read back into our encoder (bpe::from_merges: HF merge semantics,
// rank = position in model.merges). Only what GPT-2 is can be read: model BPE
// over the ByteLevel alphabet, pre_tokenizer ByteLevel (add_prefix_space
// false, use_regex true: GPT-2's pattern), decoder ByteLevel, no normalizer,
// post_processor null or ByteLevel, added tokens special and numbered after
// the vocabulary. Anything else is unimplemented, naming the file and field.
// Encoding follows tiktoken's encode_ordinary rule: special tokens' text in the
// input is plain text (HF's encode would match it). Pure functions; any thread.
#pragma once

#include "libs/status/status.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/bpe_train.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::tokenizer {

// GPT-2's bytes_to_unicode: each byte as one printable character (UTF-8):
// '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, the other
// 68 bytes for U+0100.. in byte order (space is "Ġ", U+0120).
std::string to_byte_level(std::string_view bytes);
// The inverse; nullopt for a character outside that alphabet or bad UTF-8.
std::optional<std::string> from_byte_level(std::string_view text);

// A byte-level BPE as tokenizer.json holds it.
struct bpe_spec {
  std::vector<std::string> tokens;      // ordinary tokens' bytes by id
  std::vector<bpe::merge_pair> merges;  // rank order
  std::vector<std::string> specials;    // ids after the ordinary tokens
  bool ignore_merges = false;
};

bpe_spec spec_of(const trained_bpe& t);
// The merges of a tiktoken-ranked vocabulary (GPT-2): token r's merge is the
// last step of merging its bytes with ranks below r. unimplemented when that
// does not end in two tokens.
result<bpe_spec> spec_from_ranks(const bpe& b);
// Our encoder for a spec; `source` names it in errors.
result<bpe> encoder_of(const bpe_spec& s, const std::string& source);

// tokenizer.json text: merges as "left right" strings (every version of the
// format reads them; byte-level tokens never contain a space).
std::string to_hf_json(const bpe_spec& s);
// Writes it atomically (temp file, fsync, rename).
status write_hf_json(const std::string& path, const bpe_spec& s);

// Reads tokenizer.json text (merges as strings or as [left, right] pairs).
// corruption for malformed files, unimplemented for other kinds of tokenizer.
result<bpe_spec> parse_hf_json(std::string_view json, const std::string& source);
// parse_hf_json + encoder_of on a file; not_found when it does not exist.
result<bpe> load_hf_json(const std::string& path);

}  // namespace loom::tokenizer
