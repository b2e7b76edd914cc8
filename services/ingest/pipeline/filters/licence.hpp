// Licence and copyright flags for one document: SPDX tags
// ("SPDX-License-Identifier: MIT OR Apache-2.0"), full licence texts recognised
// by distinctive phrases (licence_table.cpp), licence notices ("... GNU General
// Public License as published by the Free Software Foundation; either version 2
// ... or any later version" -> GPL-2.0-or-later), and copyright notices
// ("Copyright (c) 2020 Name", "© 2021 Name"). A dataset's licence_policy either
// reports them (default) or quarantines documents carrying a denied licence.
// licence_scanner keeps a scratch buffer: one per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::ingest {

enum class licence_evidence : std::uint8_t { full_text, spdx_tag, notice };
std::string_view to_string(licence_evidence e);

struct licence_match {
  std::string id;  // SPDX id; full texts give the version family ("GPL-2.0"), notices say -only/-or-later
  licence_evidence evidence = licence_evidence::full_text;
};

struct copyright_notice {
  std::uint32_t line = 0;  // 1-based line within the document
  std::string text;        // the notice line, comment marks stripped, at most 200 bytes
};

struct licence_findings {
  std::vector<licence_match> licences;      // one per id, strongest evidence first
  std::vector<copyright_notice> copyrights; // at most max_copyrights
  std::uint32_t copyright_lines = 0;        // all notice lines, listed or not
  bool any() const { return !licences.empty() || copyright_lines > 0; }
};

class licence_scanner {
 public:
  static constexpr std::size_t max_copyrights = 16;
  licence_findings scan(std::string_view text);

 private:
  std::string norm_;  // lower-case alphanumeric words of the text, single spaces
  std::vector<std::pair<std::uint16_t, std::uint32_t>> hits_;  // (phrase, position) in norm_
};

// Ids that a full licence text can be recognised as.
std::vector<std::string_view> known_licence_ids();

struct licence_policy {
  enum class mode : std::uint8_t { report, deny };
  mode action = mode::report;
  // Denied ids. "GPL-2.0" also covers GPL-2.0-only, GPL-2.0-or-later, GPL-2.0+;
  // a trailing '*' is a prefix ("GPL-*", "CC-BY-NC-*"). Case-insensitive.
  std::vector<std::string> deny;
};

bool licence_id_matches(std::string_view pattern, std::string_view id);

// Under mode::deny, the first denied match as "GPL-3.0 (full_text)"; else nullopt.
std::optional<std::string> denied_licence(const licence_findings& f, const licence_policy& p);

}  // namespace loom::ingest
