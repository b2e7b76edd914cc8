#include "libs/dedup/fingerprint.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/dedup/testing.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace loom::dedup;

namespace {

content_key sha_key(std::string_view normalised) {
  const auto d = loom::crypto::sha256(normalised);
  content_key k;
  for (int i = 0; i < 8; ++i) {
    k.hi = k.hi << 8 | d[i];
    k.lo = k.lo << 8 | d[8 + i];
  }
  return k;
}

std::string random_words(std::mt19937_64& rng, std::size_t n, std::size_t vocab) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += "w" + std::to_string(rng() % vocab) + " ";
  return s;
}

}  // namespace

TEST_CASE("whitespace runs become one space and the ends are trimmed") {
  CHECK(normalise_whitespace("  a \t\n b\r\n\nc  ") == "a b c");
  CHECK(normalise_whitespace("") == "");
  CHECK(normalise_whitespace(" \n\t ") == "");
  CHECK(normalise_whitespace("Case, Punct!") == "Case, Punct!");
}

TEST_CASE("the content key is the first 128 bits of SHA-256 of the normalised text") {
  fingerprinter f;
  CHECK(f.content("hello   world\n") == sha_key("hello world"));
  CHECK(f.content("hello world") == f.content("\thello\nworld"));
  CHECK(f.content("hello world") != f.content("Hello world"));
  CHECK(f.content("") == sha_key(""));
}

TEST_CASE("a document over 1 MiB streams through the hash with the same key") {
  std::mt19937_64 rng(7);
  std::string big;
  while (big.size() < (3u << 20) + 12345) {
    big += random_words(rng, 20, 1000);
    big += rng() % 3 ? "\n" : " \t  ";  // whitespace runs across the 1 MiB piece boundaries too
  }
  fingerprinter f;
  CHECK(f.content(big) == sha_key(normalise_whitespace(big)));
}

TEST_CASE("case, punctuation and spacing do not change the signature") {
  fingerprinter f;
  signature a, b, c;
  CHECK(f.minhash("The quick brown fox jumps over the lazy dog.", a) == 5);
  CHECK(f.minhash("the QUICK, brown -- fox; jumps\nover the lazy dog", b) == 5);
  CHECK(a == b);
  CHECK(f.minhash("the quick brown fox jumps over the lazy cat", c) == 5);
  CHECK(a != c);
  CHECK(estimated_jaccard(a, c) == doctest::Approx(4.0 / 6.0).epsilon(0.25));
}

TEST_CASE("short texts are one shingle and texts without words have none") {
  fingerprinter f;
  signature a, b, e;
  CHECK(f.minhash("only three words", a) == 1);
  CHECK(f.minhash("ONLY three... words!", b) == 1);
  CHECK(a == b);
  CHECK(f.minhash("  ... --- !!! ", e) == 0);
  for (auto v : e) CHECK(v == empty_min);
}

TEST_CASE("long words are hashed over all their bytes") {
  fingerprinter f;
  signature a, b;
  f.minhash("internationalization is a very long word indeed", a);
  f.minhash("internationalizatiom is a very long word indeed", b);
  CHECK(a != b);
  // UTF-8 letters are word bytes, so "naïve" is one word and differs from "naive".
  f.minhash("a naïve word in five", a);
  f.minhash("a naive word in five", b);
  CHECK(a != b);
}

TEST_CASE("band keys depend on the band and its rows only") {
  fingerprinter f;
  signature a, b;
  f.minhash("one two three four five six seven eight nine ten", a);
  b = a;
  for (int band = 0; band < bands; ++band) CHECK(band_key(a, band) == band_key(b, band));
  b[rows * 3] ^= 1;  // a row of band 3
  CHECK(band_key(a, 3) != band_key(b, 3));
  CHECK(band_key(a, 2) == band_key(b, 2));
  CHECK(band_key(a, 0) != band_key(a, 1));
}

TEST_CASE("another seed gives other permutations") {
  fingerprinter f1(1), f2(2);
  signature a, b;
  f1.minhash("some words that make a few shingles here", a);
  f2.minhash("some words that make a few shingles here", b);
  CHECK(a != b);
}

// The permutation family must behave like independent random permutations:
// the estimate is unbiased and its spread is the binomial sqrt(J(1-J)/112).
TEST_CASE("estimated Jaccard is unbiased with binomial spread against the true 5-gram Jaccard") {
  std::mt19937_64 rng(20240607);
  fingerprinter f;
  const int pairs = 400;
  double sum = 0, sumsq = 0, sum_pred_var = 0;
  for (int p = 0; p < pairs; ++p) {
    // Two documents sharing a middle part; the shared fraction spans J ~ 0.3-0.95.
    const std::size_t shared = 100 + rng() % 400, own = 5 + rng() % 60;
    const std::string mid = random_words(rng, shared, 1u << 30);
    const std::string a = random_words(rng, own, 1u << 30) + mid + random_words(rng, own, 1u << 30);
    const std::string b = random_words(rng, own, 1u << 30) + mid + random_words(rng, own, 1u << 30);
    const double j = testing::true_jaccard(testing::oracle_shingles(a), testing::oracle_shingles(b));
    signature sa, sb;
    f.minhash(a, sa);
    f.minhash(b, sb);
    const double e = estimated_jaccard(sa, sb) - j;
    sum += e;
    sumsq += e * e;
    sum_pred_var += j * (1 - j) / permutations;
  }
  const double bias = sum / pairs, sd = std::sqrt(sumsq / pairs), pred = std::sqrt(sum_pred_var / pairs);
  MESSAGE("bias " << bias << " rms error " << sd << " binomial " << pred);
  CHECK(std::abs(bias) < 3 * pred / std::sqrt(pairs) + 0.002);
  CHECK(sd > 0.85 * pred);
  CHECK(sd < 1.15 * pred);
}
