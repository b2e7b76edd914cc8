// Import profiles: named sets of cleaning options and quality thresholds that a
// dataset chooses with `--profile P`. Presets:
//   default  Gopher quality + repetition rules, C4 lorem ipsum; prose-oriented.
//   web      default + C4's crawl rules: '{' rejects, javascript/policy/short/
//            unpunctuated lines dropped, at least 3 sentences.
//   code     indentation kept, no word statistics (code is symbols and short
//            identifiers), no repetition rules; only lorem ipsum and non-empty.
//   minimal  cleaning only; no quality rule.
// Plain values; copy freely.
#pragma once

#include "libs/status/status.hpp"
#include "services/ingest/pipeline/filters/clean.hpp"
#include "services/ingest/pipeline/filters/quality.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace loom::ingest {

struct profile {
  std::string name = "default";
  clean_options clean;
  quality_rules quality;
};

// A preset by name; invalid_argument naming the known ones otherwise.
result<profile> profile_by_name(std::string_view name);
std::vector<std::string> profile_names();

}  // namespace loom::ingest
