#include "libs/tokenizer/pretokenize.hpp"
#include "libs/tokenizer/unicode_class.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace loom::tokenizer;
using pieces = std::vector<std::string>;

namespace {

pieces split(std::string_view s) {
  pieces out;
  for (auto p : split_pieces(s)) out.emplace_back(p);
  return out;
}

// Replace every byte that does not start well-formed UTF-8 by U+FFFD, keeping
// for each output byte the input offset it came from (to compare boundaries).
std::string replace_invalid(const std::string& in, std::vector<std::size_t>& origin) {
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  for (std::size_t i = 0; i < in.size();) {
    char32_t cp;
    std::size_t len = decode_utf8(p + i, p + in.size(), cp);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      origin.insert(origin.end(), 3, i);
      len = 1;
    } else {
      out.append(in, i, len);
      for (std::size_t k = 0; k < len; ++k) origin.push_back(i + k);
    }
    i += len;
  }
  return out;
}

}  // namespace

TEST_CASE("English splits into GPT-2's pieces: words keep their leading space") {
  CHECK(split("Hello world, it's 2024!") == pieces{"Hello", " world", ",", " it", "'s", " 2024", "!"});
  CHECK(split("abc123def") == pieces{"abc", "123", "def"});
  CHECK(split("  x") == pieces{" ", " x"});
  CHECK(split("x...  !?") == pieces{"x", "...", " ", " !?"});
}

TEST_CASE("only lower-case ASCII contractions are special, and only at a piece start") {
  CHECK(split("don't we'll they've I'd you're I'm") ==
        pieces{"don", "'t", " we", "'ll", " they", "'ve", " I", "'d", " you", "'re", " I", "'m"});
  CHECK(split("DON'T it'S") == pieces{"DON", "'", "T", " it", "'", "S"});
  CHECK(split("'sup") == pieces{"'s", "up"});
  CHECK(split(".'s") == pieces{".'", "s"});
  CHECK(split(" 's") == pieces{" '", "s"});
  CHECK(split("it\xE2\x80\x99s") == pieces{"it", "\xE2\x80\x99", "s"});  // U+2019 is punctuation
  CHECK(split("'") == pieces{"'"});
  CHECK(split("'l") == pieces{"'", "l"});
}

TEST_CASE("whitespace runs give their last character to the next piece") {
  CHECK(split("a  b") == pieces{"a", " ", " b"});
  CHECK(split("a\n\nb") == pieces{"a", "\n", "\n", "b"});
  CHECK(split("a \n b") == pieces{"a", " \n", " b"});
  CHECK(split("end   ") == pieces{"end", "   "});
  CHECK(split("\t\tx") == pieces{"\t", "\t", "x"});
  CHECK(split("x\r\n\r\ny") == pieces{"x", "\r\n\r", "\n", "y"});
  CHECK(split("x\xC2\xA0y") == pieces{"x", "\xC2\xA0", "y"});             // NBSP is \s but not ' '
  CHECK(split(" \xC2\xA0y") == pieces{" ", "\xC2\xA0", "y"});
  CHECK(split("x\xE2\x80\x8By") == pieces{"x", "\xE2\x80\x8B", "y"});     // ZWSP is not \s
  CHECK(split("\x1C\x1Dz") == pieces{"\x1C\x1D", "z"});                    // not White_Space
}

TEST_CASE("letters, numbers and marks follow Unicode 16 general categories") {
  CHECK(split("e\xCC\x81t\xC3\xA9") == pieces{"e", "\xCC\x81", "t\xC3\xA9"});  // combining acute is a mark
  CHECK(split(" \xD9\xA3\xD9\xA4x") == pieces{" \xD9\xA3\xD9\xA4", "x"});       // Arabic-Indic digits
  CHECK(split("\xE2\x85\xA7\xC2\xB2") == pieces{"\xE2\x85\xA7\xC2\xB2"});        // Nl then No
  CHECK(classify(0x1C89) == char_class::letter);   // new in Unicode 16 (ICU 72 lacks it)
  CHECK(classify(0x10D40) == char_class::number);  // Garay digit zero, Unicode 16
  CHECK(classify(0x323B0) == char_class::other);   // Unicode 17: unassigned for tiktoken 1.0.22
  CHECK(classify(0x0378) == char_class::other);
  CHECK(classify(0x3000) == char_class::space);
  CHECK(classify(0x180E) == char_class::other);
  CHECK(classify(0xFFFD) == char_class::other);
  CHECK(classify(0x4E2D) == char_class::letter);
  CHECK(classify(0x10FFFF) == char_class::other);
}

TEST_CASE("the UTF-8 decoder accepts exactly the well-formed sequences") {
  auto len = [](std::string s) {
    char32_t cp;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    return decode_utf8(p, p + s.size(), cp);
  };
  CHECK(len("\xC2\x80") == 2);
  CHECK(len("\xC1\xBF") == 0);          // overlong
  CHECK(len("\xE0\x9F\xBF") == 0);      // overlong
  CHECK(len("\xE0\xA0\x80") == 3);
  CHECK(len("\xED\x9F\xBF") == 3);
  CHECK(len("\xED\xA0\x80") == 0);      // surrogate
  CHECK(len("\xF0\x8F\xBF\xBF") == 0);  // overlong
  CHECK(len("\xF4\x8F\xBF\xBF") == 4);
  CHECK(len("\xF4\x90\x80\x80") == 0);  // above U+10FFFF
  CHECK(len("\xF5\x80\x80\x80") == 0);
  CHECK(len("\xE2\x82") == 0);          // truncated
  CHECK(len("\x80") == 0);
}

TEST_CASE("invalid bytes split exactly as U+FFFD would, and pieces cover the input") {
  CHECK(split("a\xFF" "b") == pieces{"a", "\xFF", "b"});
  CHECK(split(" \xFF\xFE!") == pieces{" \xFF\xFE!"});
  CHECK(split("x\xC0\xAF") == pieces{"x", "\xC0\xAF"});
  CHECK(split("\xE2\x82 z") == pieces{"\xE2\x82", " z"});

  std::mt19937_64 rng(20240601);
  const char* alphabet[] = {"a", "Z", "1", " ", "\n", "'", "s", "!", "\xC3\xA9", "\xE4\xB8\xAD", "\xC2\xA0",
                            "\xF0\x9F\x98\x80", "\xFF", "\x80", "\xE2\x82", "\xF4\x90", "\xED\xA0\x80"};
  for (int doc = 0; doc < 2000; ++doc) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) s += rng() % 4 == 0 ? std::string(1, static_cast<char>(rng())) : alphabet[rng() % 17];
    std::string joined;
    std::vector<std::size_t> raw_cuts;
    for (auto p : split_pieces(s)) {
      REQUIRE(!p.empty());
      raw_cuts.push_back(joined.size());
      joined += p;
    }
    REQUIRE(joined == s);
    std::vector<std::size_t> origin;
    const std::string fixed = replace_invalid(s, origin);
    std::vector<std::size_t> fixed_cuts;
    std::size_t at = 0;
    for (auto p : split_pieces(fixed)) {
      fixed_cuts.push_back(origin[at]);
      at += p.size();
    }
    CHECK(raw_cuts == fixed_cuts);
  }
}
