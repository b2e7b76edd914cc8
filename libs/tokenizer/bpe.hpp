// loom::tokenizer::bpe: GPT-2 byte-level BPE whose ids are identical to
// tiktoken's `gpt2` encoding (encode_ordinary: "<|endoftext|>" in the text is
// encoded as plain text, never as the special token 50256).
//
// Works on raw bytes, never normalises: decode(encode(x)) == x for any bytes.
// Invalid UTF-8 (tiktoken's API cannot take it, so this is our rule): each byte
// that does not start a well-formed sequence is one character of class "other",
// the class U+FFFD has, for splitting; BPE then runs on the original bytes.
// Time is O(n log n) in the longest piece (pathological input stays fast).
//
// Ownership and threads: a bpe is an immutable handle to shared tables; copies
// are cheap and every const method is safe from any number of threads. Each
// thread keeps its own bounded cache of piece -> ids (no locks).
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::tokenizer {

// Where load_gpt2() looks: $LOOM_GPT2_VOCAB, else this path (scripts/install-vocab).
inline constexpr const char* gpt2_vocab_env = "LOOM_GPT2_VOCAB";
inline constexpr const char* gpt2_vocab_default_path = "/usr/local/share/edgeloom/gpt2.json";

class bpe {
 public:
  // The GPT-2 vocabulary from $LOOM_GPT2_VOCAB or gpt2_vocab_default_path;
  // not_found naming both when neither is there.
  static result<bpe> load_gpt2();
  // A tiktoken encoder file (JSON: bpe_ranks, special_tokens, pat_str,
  // explicit_n_vocab) whose pat_str is GPT-2's; corruption / unimplemented otherwise.
  static result<bpe> load(const std::string& path);
  // Same, from the file's contents; `source` names it in errors.
  static result<bpe> parse(std::string_view json, const std::string& source);

  // A byte-level BPE with Hugging Face `tokenizers` semantics (tokenizer.json;
  // libs/tokenizer/train/hf_json.hpp reads the file): `tokens` are the ordinary
  // tokens' bytes by id (every single byte among them), `merges` the (left,
  // right) pairs in rank order. A piece merges only by listed pairs, lowest rank
  // first, leftmost on ties -- not tiktoken's "any split that is a token".
  // Each merge makes the token bytes(left) + bytes(right), and those ids must
  // grow with the rank (so id order is rank order). `specials` take the ids
  // after the ordinary tokens. ignore_merges: a piece that is a token is that
  // token (HF's flag); otherwise only when merging its bytes gives that token.
  // corruption / unimplemented naming `source` otherwise.
  struct merge_pair {
    std::uint32_t left = 0, right = 0;
  };
  static result<bpe> from_merges(std::vector<std::string> tokens, const std::vector<merge_pair>& merges,
                                 std::vector<std::string> specials, bool ignore_merges, const std::string& source);

  std::vector<std::uint32_t> encode(std::string_view text) const;
  // Appends the ids of `text` to `out`. Allocates only when `out` must grow
  // (and, amortised, when this thread's piece cache grows): the hot path.
  void encode_into(std::string_view text, std::vector<std::uint32_t>& out) const;

  // REQUIRES: every id is valid_id(); invalid ids decode to nothing.
  std::string decode(std::span<const std::uint32_t> ids) const;
  void decode_into(std::span<const std::uint32_t> ids, std::string& out) const;

  // Ordinary tokens plus special tokens (GPT-2: 50,257).
  std::size_t vocab_size() const;
  bool valid_id(std::uint32_t id) const { return id < vocab_size(); }
  // The bytes of one token (special tokens: their text).
  std::string_view token_bytes(std::uint32_t id) const;
  // Ordinary tokens: ids 0..ordinary_size()-1; the special tokens follow.
  std::size_t ordinary_size() const;
  // The id of special token `text` ("<|endoftext|>"), if this vocabulary has it.
  std::optional<std::uint32_t> special_id(std::string_view text) const;

  struct impl;  // tables; defined in bpe.cpp

 private:
  explicit bpe(std::shared_ptr<const impl> p) : impl_(std::move(p)) {}
  std::shared_ptr<const impl> impl_;
};

}  // namespace loom::tokenizer
