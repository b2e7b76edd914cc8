#include "services/ingest/pipeline/filters/annotation.hpp"

#include <algorithm>

namespace loom::ingest {
namespace {

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

std::string at(std::size_t i) { return "messages[" + std::to_string(i) + "]"; }

}  // namespace

std::vector<annotation_error> validate_sft(const std::vector<chat_turn>& turns, const annotation_rules& rules) {
  std::vector<annotation_error> errs;
  if (turns.empty()) {
    errs.push_back({"no_turns", "messages", "messages is empty"});
    return errs;
  }
  bool user = false, assistant = false;
  const std::string* prev = nullptr;  // role of the previous non-system turn
  for (std::size_t i = 0; i < turns.size(); ++i) {
    const auto& t = turns[i];
    if (std::find(rules.roles.begin(), rules.roles.end(), t.role) == rules.roles.end()) {
      errs.push_back({"bad_role", at(i) + ".role", "role \"" + t.role.substr(0, 32) + "\" is not an allowed role"});
      continue;
    }
    if (blank(t.content)) errs.push_back({"empty_content", at(i) + ".content", "content is empty"});
    if (t.role == "system") {
      if (i != 0) errs.push_back({"system_not_first", at(i) + ".role", "a system turn is allowed only first"});
      continue;
    }
    user = user || t.role == "user";
    assistant = assistant || t.role == "assistant";
    if (!prev && t.role != "user")
      errs.push_back({"first_not_user", at(i) + ".role", "the first non-system turn is \"" + t.role + "\", not \"user\""});
    if (rules.require_alternation && prev && *prev == t.role)
      errs.push_back({"not_alternating", at(i) + ".role", "two \"" + t.role + "\" turns in a row"});
    prev = &t.role;
  }
  if (!user) errs.push_back({"no_user_turn", "messages", "no user turn"});
  if (!assistant) errs.push_back({"no_assistant_turn", "messages", "no assistant turn"});
  if (rules.require_last_assistant && assistant && turns.back().role != "assistant")
    errs.push_back({"last_not_assistant", at(turns.size() - 1) + ".role", "the last turn is not the assistant's"});
  return errs;
}

std::vector<annotation_error> validate_preference(const std::string& prompt, const std::string& chosen,
                                                  const std::string& rejected) {
  std::vector<annotation_error> errs;
  if (blank(prompt)) errs.push_back({"empty_prompt", "prompt", "prompt is empty"});
  if (blank(chosen)) errs.push_back({"empty_chosen", "chosen", "chosen is empty"});
  if (blank(rejected)) errs.push_back({"empty_rejected", "rejected", "rejected is empty"});
  if (!blank(chosen) && chosen == rejected)
    errs.push_back({"chosen_equals_rejected", "rejected", "chosen and rejected are the same text"});
  return errs;
}

std::vector<annotation_error> validate_annotation(const document& d, const annotation_rules& rules) {
  switch (d.kind) {
    case doc_kind::sft: return validate_sft(d.messages, rules);
    case doc_kind::preference: return validate_preference(d.prompt, d.chosen, d.rejected);
    case doc_kind::text: break;
  }
  return {};
}

double annotation_stats::pass_rate() const {
  const std::uint64_t n = sft_records + preference_records;
  return n == 0 ? 1.0 : static_cast<double>(sft_valid + preference_valid) / static_cast<double>(n);
}

}  // namespace loom::ingest
