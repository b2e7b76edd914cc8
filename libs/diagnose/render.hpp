// How a diagnosis is shown: as text for a terminal, as JSON (`--json`), and
// the rule table as docs/troubleshooting.md (`loom diagnose --rules-markdown`;
// a test keeps the committed file equal to it). Pure functions.
#pragma once

#include "libs/diagnose/evidence.hpp"
#include "libs/diagnose/rules.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace loom::diagnose {

// "JOB (template T, failed): ..." then each finding, surest first, with its
// evidence and numbered repair steps; "no problem found" when there is none.
std::string render_text(const evidence& e, const std::vector<finding>& found);

nlohmann::json render_json(const evidence& e, const std::vector<finding>& found);

// docs/troubleshooting.md: every rule's cause, what it reads, when it fires, the repair.
std::string troubleshooting_markdown();

}  // namespace loom::diagnose
