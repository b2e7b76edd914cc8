#include "services/ingest/pipeline/filters/licence.hpp"
#include "services/ingest/pipeline/pipeline.hpp"
#include "services/ingest/pipeline/test_support.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

using namespace loom::ingest;
using namespace loom::ingest::testing;

namespace {

std::set<std::string> ids(const licence_findings& f, licence_evidence e) {
  std::set<std::string> out;
  for (const auto& m : f.licences)
    if (m.evidence == e) out.insert(m.id);
  return out;
}

std::set<std::string> full_text_ids(std::string_view text) {
  licence_scanner s;
  return ids(s.scan(text), licence_evidence::full_text);
}

// Test data only, never committed: npm's spdx-license-list, installed by
// scripts/install-vocab (run by scripts/setup), or $LOOM_SPDX_LICENSE_LIST.
std::string spdx_list_path() {
  if (const char* p = std::getenv("LOOM_SPDX_LICENSE_LIST"))
    return std::filesystem::exists(p) ? std::string(p) : std::string();
  for (const char* p : {"/usr/local/lib/edgeloom/npm/node_modules/spdx-license-list/spdx-full.json",
                        "/usr/lib/node_modules/spdx-license-list/spdx-full.json",
                        "/usr/local/lib/node_modules/spdx-license-list/spdx-full.json"})
    if (std::filesystem::exists(p)) return p;
  return {};
}

}  // namespace

TEST_CASE("every licence in /usr/share/common-licenses is found by its SPDX id") {
  const std::map<std::string, std::string> expected = {
      {"Apache-2.0", "Apache-2.0"}, {"Artistic", "Artistic-1.0-Perl"}, {"BSD", "BSD-3-Clause"},
      {"CC0-1.0", "CC0-1.0"},       {"GFDL", "GFDL-1.3"},              {"GFDL-1.2", "GFDL-1.2"},
      {"GFDL-1.3", "GFDL-1.3"},     {"GPL", "GPL-3.0"},                {"GPL-1", "GPL-1.0"},
      {"GPL-2", "GPL-2.0"},         {"GPL-3", "GPL-3.0"},              {"LGPL", "LGPL-3.0"},
      {"LGPL-2", "LGPL-2.0"},       {"LGPL-2.1", "LGPL-2.1"},          {"LGPL-3", "LGPL-3.0"},
      {"MPL-1.1", "MPL-1.1"},       {"MPL-2.0", "MPL-2.0"}};
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(licences_dir)) {
    const std::string name = e.path().filename().string();
    auto it = expected.find(name);
    if (it == expected.end()) continue;
    ++seen;
    INFO(name);
    const std::string text = read_all(e.path().string());
    CHECK(full_text_ids(text) == std::set<std::string>{it->second});
    // Reflowed, upper-cased, and wrapped in a C comment: still the same licence.
    std::string reflowed = text, commented = "/*\n";
    for (auto& c : reflowed) c = c == '\n' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t nl = text.find('\n', start);
      commented += " * " + text.substr(start, nl == std::string::npos ? std::string::npos : nl - start) + "\n";
      start = nl == std::string::npos ? text.size() : nl + 1;
    }
    commented += " */\n";
    CHECK(full_text_ids(reflowed) == std::set<std::string>{it->second});
    CHECK(full_text_ids(commented) == std::set<std::string>{it->second});
  }
  CHECK(seen == static_cast<int>(expected.size()));
}

TEST_CASE("every fingerprinted licence is found in the SPDX licence list's own text") {
  // Not optional: without the list this test would check nothing, so it fails.
  const std::string path = spdx_list_path();
  REQUIRE_MESSAGE(!path.empty(), "spdx-license-list is not installed: run scripts/install-vocab (scripts/setup "
                                 "does), or point LOOM_SPDX_LICENSE_LIST at its spdx-full.json");
  auto list = nlohmann::json::parse(read_all(path));
  int checked = 0;
  for (auto id : known_licence_ids()) {
    std::string key(id);
    if (!list.contains(key)) key += "-only";
    INFO(id);
    REQUIRE(list.contains(key));
    CHECK(full_text_ids(list[key]["licenseText"].get<std::string>()).count(std::string(id)) == 1);
    ++checked;
  }
  CHECK(checked == static_cast<int>(known_licence_ids().size()));
  // And the texts of unrelated licences are not taken for one of ours.
  int wrong = 0;
  for (auto& [key, v] : list.items()) {
    if (!v.contains("licenseText")) continue;
    for (const auto& found : full_text_ids(v["licenseText"].get<std::string>())) {
      bool same_family = key.rfind(found, 0) == 0;
      bool known_variant = found == "MIT" || found.rfind("BSD-", 0) == 0 || found == "ISC" || found == "Zlib" ||
                           found.rfind("Artistic-1.0", 0) == 0 || found == "MPL-1.1" || found == "EPL-1.0" ||
                           found == "GPL-3.0";  // the SPDX LGPL-3.0 text carries the GPL-3.0 text
      if (!same_family && !known_variant) {
        ++wrong;
        MESSAGE(key << " taken for " << found);
      }
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("SPDX tags yield their licence ids and skip operators and exceptions") {
  licence_scanner s;
  auto f = s.scan("// SPDX-License-Identifier: (MIT OR Apache-2.0) AND BSD-3-Clause WITH LLVM-exception */\nint x;\n"
                  "# spdx-license-identifier: GPL-2.0+\n");
  CHECK(ids(f, licence_evidence::spdx_tag) ==
        std::set<std::string>{"MIT", "Apache-2.0", "BSD-3-Clause", "GPL-2.0+"});
}

TEST_CASE("licence notices name the version and whether later versions are allowed") {
  licence_scanner s;
  auto gpl2plus = s.scan(
      "This program is free software; you can redistribute it and/or modify it under the terms of the GNU General\n"
      " * Public License as published by the Free Software Foundation; either version 2 of the License, or\n"
      " * (at your option) any later version.");
  CHECK(ids(gpl2plus, licence_evidence::notice) == std::set<std::string>{"GPL-2.0-or-later"});
  auto lgpl21 = s.scan(
      "under the terms of the GNU Lesser General Public License as published by the Free Software Foundation; "
      "version 2.1 of the License.");
  CHECK(ids(lgpl21, licence_evidence::notice) == std::set<std::string>{"LGPL-2.1-only"});
  auto cc = s.scan("Text is licensed under a Creative Commons Attribution-ShareAlike 4.0 International License.");
  CHECK(ids(cc, licence_evidence::notice) == std::set<std::string>{"CC-BY-SA-4.0"});
  auto cc2 = s.scan("Photo: CC BY-NC-ND 3.0, licence attached.");
  CHECK(ids(cc2, licence_evidence::notice) == std::set<std::string>{"CC-BY-NC-ND-3.0"});
  auto apache = s.scan("Licensed under the Apache License, Version 2.0 (the \"License\");");
  CHECK(ids(apache, licence_evidence::notice) == std::set<std::string>{"Apache-2.0"});
  // A full text's own how-to-apply section is not reported again as a notice.
  auto gpl2 = s.scan(licence_text("GPL-2"));
  CHECK(ids(gpl2, licence_evidence::notice).empty());
  CHECK(s.scan("The weather was fine and we walked along the river.").licences.empty());
}

TEST_CASE("copyright notices are found with their lines, and prose about copyright is not one") {
  licence_scanner s;
  auto f = s.scan("/*\n * Copyright (c) 2020-2023 Jane Doe <jane@example.org>\n * Copyright 1999 ACME Corp.\n"
                  "© 2021 Example GmbH\n(C) 2019 Someone\n"
                  "The above copyright notice shall be included. The copyright holders disclaim.\n"
                  "Copyright: 2018, Debian Style\n */");
  REQUIRE(f.copyrights.size() == 5);
  CHECK(f.copyright_lines == 5);
  CHECK(f.copyrights[0].line == 2);
  CHECK(f.copyrights[0].text == "Copyright (c) 2020-2023 Jane Doe <jane@example.org>");
  CHECK(f.copyrights[1].text == "Copyright 1999 ACME Corp.");
  CHECK(f.copyrights[2].line == 4);
  CHECK(f.copyrights[3].text == "(C) 2019 Someone");
  CHECK(f.copyrights[4].line == 7);
  CHECK(s.scan("the copyright holders and the copyright notice").copyright_lines == 0);
  CHECK(s.scan(licence_text("GPL-2")).copyright_lines >= 1);  // "Copyright (C) 1989, 1991 Free Software Foundation"
}

TEST_CASE("deny lists match id families and prefixes and quarantine with the reason, report keeps") {
  CHECK(licence_id_matches("GPL-2.0", "GPL-2.0-or-later"));
  CHECK(licence_id_matches("GPL-2.0", "GPL-2.0+"));
  CHECK(licence_id_matches("gpl-2.0", "GPL-2.0-only"));
  CHECK_FALSE(licence_id_matches("GPL-2.0", "LGPL-2.0"));
  CHECK_FALSE(licence_id_matches("GPL-2.0", "GPL-2.0-with-classpath-exception"));
  CHECK(licence_id_matches("GPL-*", "GPL-3.0"));
  CHECK(licence_id_matches("CC-BY-NC-*", "CC-BY-NC-SA-4.0"));
  CHECK_FALSE(licence_id_matches("CC-BY-NC-*", "CC-BY-SA-4.0"));

  const std::string gpl3 = licence_text("GPL-3");
  pipeline_options deny;
  deny.licences.action = licence_policy::mode::deny;
  deny.licences.deny = {"GPL-*", "AGPL-3.0"};
  pipeline p(deny);
  document d;
  d.source = "x.txt";
  d.text = gpl3;
  auto r = p.process(d);
  CHECK(r.v.kind == outcome::quarantine);
  CHECK(r.v.rule == "licence_denied");
  CHECK(r.v.detail == "GPL-3.0 (full_text)");
  CHECK(p.report().quarantined_by_reason.at("licence_denied") == 1);

  pipeline report_only;
  document d2;
  d2.text = gpl3;
  auto r2 = report_only.process(d2);
  CHECK(r2.v.kind == outcome::keep);
  CHECK(report_only.report().licences.at("GPL-3.0") == 1);
  CHECK(report_only.report().documents_with_copyright == 1);
}
