// Shared by the tokenizer training tests: the fixed training corpus (Debian's
// /usr/share/common-licenses, present on every Debian machine, nothing
// committed), training on it, and random text from a fixed seed.
// Header-only; single-threaded helpers.
#pragma once

#include "libs/tokenizer/train/bpe_train.hpp"
#include "libs/tokenizer/train/piece_counts.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace loom::test::tok_train {

inline std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_all(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  REQUIRE(f.good());
}

// The regular files of /usr/share/common-licenses (symlinks name the same texts), sorted.
inline std::vector<std::string> license_files() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses", ec))
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  REQUIRE_MESSAGE(files.size() >= 10, "expected Debian's /usr/share/common-licenses");
  return files;
}

// Each license file, one document each.
inline const std::vector<std::string>& license_texts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> t;
    for (const auto& f : license_files()) t.push_back(read_all(f));
    return t;
  }();
  return texts;
}

inline const tokenizer::piece_counts& license_counts() {
  static const tokenizer::piece_counts counts = [] {
    tokenizer::piece_counts c;
    for (const auto& t : license_texts()) c.add_document(t);
    return c;
  }();
  return counts;
}

inline tokenizer::trained_bpe train_licenses(std::size_t vocab) {
  tokenizer::train_options o;
  o.vocab_size = vocab;
  auto t = tokenizer::train_bpe(license_counts(), o);
  REQUIRE(t.ok());
  return std::move(t).value();
}

inline void append_utf8(std::string& s, char32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Random valid UTF-8 whose characters every regex engine classifies alike
// (Unicode 15 and 16, JavaScript's \s and White_Space agree: no U+0085, no
// U+FEFF): ASCII words, digits, punctuation, whitespace runs, contractions,
// Latin-1, Greek, Cyrillic, CJK, emoji, non-ASCII digits and spaces.
inline std::string random_text(std::mt19937_64& rng, std::size_t max_len) {
  static const char32_t pool[] = {
      U'a', U'e', U't', U'h', U'o', U'n', U's', U'r', U'T', U'A', U'I', U'0', U'1', U'7', U'9', U' ', U' ', U' ',
      U'\n', U'\t', U'\r', U'.', U',', U'\'', U'"', U'-', U'(', U')', U'!', U'?', U'/', U'_', U'#', U'{', U'}',
      U'é', U'ü', U'ß', U'ñ', U'Ω', U'λ', U'π', U'Ж', U'д', U'я', U'中', U'文', U'字', U'日', U'本', U'한', U'글',
      U'😀', U'🚀', U'👍', U'٣', U'٤', U'\u00A0', U'\u3000', U'\u2003', U'—', U'€', U'…', U'©', U'\u0301'};
  static const char* const words[] = {"the", " of", "'s", "'ll", "don't", " license", "Software", "  ", "\n\n",
                                      "GNU", "1999", " (c)", "http://", "é", " ça", "naïve"};
  std::string s;
  const std::size_t len = rng() % (max_len + 1);
  while (s.size() < len) {
    if (rng() % 4 == 0) s += words[rng() % std::size(words)];
    else append_utf8(s, pool[rng() % std::size(pool)]);
  }
  return s;
}

}  // namespace loom::test::tok_train
