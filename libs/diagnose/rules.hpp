// The diagnose rules: each names one cause of a failed, stuck or wasteful
// job, reads the evidence (evidence.hpp) and, when it sees its cause, says
// how sure it is, what it saw, and the repair steps in order — each a
// concrete command or `--set`. `diagnose()` runs every rule and orders the
// findings, surest first. The same table renders docs/troubleshooting.md
// (render.hpp), so the doc and the rules never disagree. Pure functions.
#pragma once

#include "libs/diagnose/evidence.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loom::diagnose {

struct finding {
  std::string rule;   // the rule's id: "diverged"
  std::string title;  // its cause in words
  double confidence = 0;  // 0..1
  std::string stage;  // the stage it concerns ("" for the job)
  std::vector<std::string> evidence;  // what was seen, with the numbers
  std::vector<std::string> repair;    // ordered steps: commands and --set overrides
};

// A rule as the doc shows it, and its matcher.
struct rule {
  std::string id, title;
  std::string looks_at;                  // the evidence it reads, for the doc
  std::vector<std::string> signals;      // what makes it fire, for the doc
  std::vector<std::string> repair;       // its repair steps in general terms, for the doc
  std::function<std::optional<finding>(const evidence&)> match;
};

// Every rule, in the order the doc lists them.
const std::vector<rule>& rules();

// Every rule's finding on `e`, surest first (ties: table order). Empty: no problem found.
std::vector<finding> diagnose(const evidence& e);

}  // namespace loom::diagnose
