// Per-document fingerprints for dedup: a content key for exact duplicates and a
// MinHash signature over word 5-grams for near duplicates (FineWeb's parameters:
// 112 permutations read as 14 bands x 8 rows). Pure functions of the text.
// A fingerprinter owns a scratch buffer: one per thread; it is cheap to make.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace loom::dedup {

constexpr int shingle_words = 5;           // FineWeb: word 5-grams
constexpr int bands = 14;                  // 14 x 8: a pair with Jaccard 0.8 shares a band with p = 0.924
constexpr int rows = 8;
constexpr int permutations = bands * rows; // 112
constexpr std::uint64_t default_seed = 0x6c6f6f6d64656475;  // changing it changes every signature

// First 128 bits of SHA-256 over the whitespace-normalised text. Why SHA-256 and
// not a 128-bit non-cryptographic hash (xxh3-128): dropping a document on a key
// match must not be steerable by whoever writes corpus text; a second preimage
// of 128 truncated SHA-256 bits costs 2^128, for xxh3 it is a matter of algebra.
// With SHA-NI it runs at ~1.4 GB/s on 4 KB documents, faster than the
// normalisation before it, so the safety costs little (bench/dedup_bench).
struct content_key {
  std::uint64_t hi = 0, lo = 0;
  auto operator<=>(const content_key&) const = default;
};

// 112 minima, one per permutation of the shingle hashes. A document without
// words has no shingles: every entry stays empty_min and it takes no part in
// fuzzy dedup.
using signature = std::array<std::uint32_t, permutations>;
constexpr std::uint32_t empty_min = 0xffffffffu;

struct fingerprint {
  content_key content;
  signature minhash{};
  std::uint32_t shingles = 0;  // word 5-grams hashed (with repeats); 0 = no words
};

// Exact-dedup normalisation: runs of ASCII whitespace become one space, leading
// and trailing whitespace goes. Case and everything else are kept (Unicode NFC
// and control characters are the cleaning stage's job, before dedup).
std::string normalise_whitespace(std::string_view text);

// Words, as MinHash sees them: maximal runs of ASCII letters and digits and of
// bytes >= 0x80 (so UTF-8 letters stay inside words), ASCII-lowercased; every
// other byte separates words and is dropped. A shingle is 5 consecutive words;
// a text of 1-4 words is one shingle of all its words.

// Fraction of equal entries among non-empty signatures: estimates the Jaccard
// similarity of the two shingle sets, with standard deviation sqrt(J(1-J)/112)
// (0.038 at J = 0.8).
double estimated_jaccard(const signature& a, const signature& b);

// LSH key of band `band` (0..13): a 64-bit hash of its 8 rows and the band index.
std::uint64_t band_key(const signature& s, int band);

class fingerprinter {
 public:
  explicit fingerprinter(std::uint64_t seed = default_seed);

  content_key content(std::string_view text);
  // Fills `out`, returns the number of shingles hashed.
  std::uint32_t minhash(std::string_view text, signature& out);
  void compute(std::string_view text, fingerprint& out);
  fingerprint compute(std::string_view text) {
    fingerprint f;
    compute(text, f);
    return f;
  }

 private:
  struct params;  // permutation constants, 64-byte aligned for the vector kernel
  struct params_deleter {
    void operator()(params* p) const;
  };
  std::unique_ptr<params, params_deleter> params_;
  std::array<std::uint64_t, shingle_words> weights_{};  // shingle = mix(sum w_i * weight_i)
  std::uint64_t word_seed_ = 0;
  std::string buf_;  // normalised or lowercased text, reused between calls
};

}  // namespace loom::dedup
