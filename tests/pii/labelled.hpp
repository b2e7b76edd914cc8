// A labelled PII evaluation set: generated items of every type (and planted
// near misses that must not be flagged) spliced into real prose from Debian
// packages on every machine (/usr/share/common-licenses, the copyright files
// of essential packages). Nothing is committed; a fixed seed makes the set the
// same on every run of the same Debian release.
//
// Values come from our own generators (names, domains, card and IBAN check
// digits computed here, independently of libs/pii) and from libphonenumber
// (valid and invalid numbers per region). Used by eval.test.cpp.
#pragma once

#include "libs/pii/pii.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::pii::test {

// One planted item: a PII span (truth) or a near miss (must stay unflagged).
struct planted {
  pii_type type;
  std::size_t start, end;
  bool near_miss;
  std::string kind;  // generator that made it ("visa", "bad_check_digits", ...)
};

struct labelled_set {
  std::string text;
  std::vector<planted> items;       // in text order
  std::vector<std::string> sources;  // carrier files read
  std::size_t carrier_bytes = 0;
};

struct set_options {
  std::uint64_t seed = 0x5EED'2025;
  std::size_t per_type = 3000;     // positives of each type
  std::size_t near_misses = 1200;  // near misses of each type
};

// Carrier lines: every non-empty line of the source files without an '@' or a
// "(ddd) ddd-dddd" (the real addresses and the FSF's phone number there are
// unlabelled: counting them as false positives would misstate precision).
std::vector<std::string> carrier_lines(std::vector<std::string>* sources = nullptr);

labelled_set make_labelled_set(const set_options& o = {});

}  // namespace loom::pii::test
