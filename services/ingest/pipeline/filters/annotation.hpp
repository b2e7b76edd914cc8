// Annotation validation for SFT chat records and preference pairs, after
// cleaning (so whitespace-only content counts as empty). The rules, stated:
//   SFT: at least one turn; each role one of annotation_rules::roles; content
//   non-empty; "system" only as the first turn; the first non-system turn is
//   "user"; user and assistant alternate (no two consecutive turns of one role);
//   at least one user and one assistant turn; the last turn is "assistant"
//   (there is something to learn from). The last two are switchable.
//   Preference: prompt, chosen and rejected non-empty; chosen != rejected.
// JSON type errors (content a number, messages not an array) are found by the
// JSONL reader as json_wrong_type/json_missing_field rejections with kind sft or
// preference; the pipeline counts them as failed annotations too.
// Stateless functions; any thread.
#pragma once

#include "services/ingest/pipeline/document.hpp"

#include <map>
#include <string>
#include <vector>

namespace loom::ingest {

struct annotation_rules {
  std::vector<std::string> roles = {"system", "user", "assistant"};
  bool require_alternation = true;
  bool require_last_assistant = true;
};

struct annotation_error {
  std::string code;     // "bad_role", "empty_content", "not_alternating", ...
  std::string field;    // "messages[2].role", "chosen"
  std::string message;
};

std::vector<annotation_error> validate_sft(const std::vector<chat_turn>& turns, const annotation_rules& rules);
std::vector<annotation_error> validate_preference(const std::string& prompt, const std::string& chosen,
                                                  const std::string& rejected);
// Dispatch on d.kind; text documents have no annotation and no error.
std::vector<annotation_error> validate_annotation(const document& d, const annotation_rules& rules);

struct annotation_stats {
  std::uint64_t sft_records = 0, sft_valid = 0;
  std::uint64_t preference_records = 0, preference_valid = 0;
  std::map<std::string, std::uint64_t> errors_by_code;

  // valid / records over both kinds; 1 when there were none.
  double pass_rate() const;
};

}  // namespace loom::ingest
