// Internal to licence.cpp: the phrase fingerprints of full licence texts. The
// phrases are in normalised form: lower case, every run of non-alphanumeric
// characters one space ("GNU GENERAL PUBLIC LICENSE\n Version 2, June 1991" ->
// "gnu general public license version 2 june 1991"). Immutable; any thread.
#pragma once

#include <span>
#include <string_view>

namespace loom::ingest::detail {

struct licence_fingerprint {
  std::string_view id;
  std::span<const std::string_view> all;       // every phrase must occur
  std::span<const std::string_view> none;      // no phrase may occur (tells variants apart)
  std::span<const std::string_view> suppresses;  // ids this match makes redundant
};

std::span<const licence_fingerprint> licence_fingerprints();

}  // namespace loom::ingest::detail
