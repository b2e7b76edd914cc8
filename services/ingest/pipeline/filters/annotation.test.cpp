#include "services/ingest/pipeline/filters/annotation.hpp"
#include "services/ingest/pipeline/pipeline.hpp"
#include "services/ingest/pipeline/test_support.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

using namespace loom::ingest;
using namespace loom::ingest::testing;
using loom::files::temp_dir;

namespace {

std::vector<std::string> codes(const std::vector<annotation_error>& errs) {
  std::vector<std::string> out;
  for (const auto& e : errs) out.push_back(e.code);
  return out;
}

std::vector<chat_turn> chat(std::initializer_list<std::pair<const char*, const char*>> turns) {
  std::vector<chat_turn> out;
  for (auto [r, c] : turns) out.push_back({r, c});
  return out;
}

}  // namespace

TEST_CASE("SFT records follow the stated role rules") {
  annotation_rules rules;
  CHECK(validate_sft(chat({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}}), rules).empty());
  CHECK(validate_sft(chat({{"user", "a"}, {"assistant", "b"}, {"user", "c"}, {"assistant", "d"}}), rules).empty());
  CHECK(codes(validate_sft({}, rules)) == std::vector<std::string>{"no_turns"});
  CHECK(codes(validate_sft(chat({{"user", "Hi"}, {"robot", "x"}, {"assistant", "y"}}), rules)) ==
        std::vector<std::string>{"bad_role"});
  CHECK(codes(validate_sft(chat({{"user", "Hi"}, {"assistant", "  \n"}}), rules)) ==
        std::vector<std::string>{"empty_content"});
  CHECK(codes(validate_sft(chat({{"user", "Hi"}, {"system", "x"}, {"assistant", "y"}}), rules)) ==
        std::vector<std::string>{"system_not_first"});
  CHECK(codes(validate_sft(chat({{"assistant", "Hi"}, {"user", "x"}, {"assistant", "y"}}), rules)) ==
        std::vector<std::string>{"first_not_user"});
  CHECK(codes(validate_sft(chat({{"user", "a"}, {"user", "b"}, {"assistant", "c"}}), rules)) ==
        std::vector<std::string>{"not_alternating"});
  CHECK(codes(validate_sft(chat({{"user", "a"}}), rules)) == std::vector<std::string>{"no_assistant_turn"});
  CHECK(codes(validate_sft(chat({{"user", "a"}, {"assistant", "b"}, {"user", "c"}}), rules)) ==
        std::vector<std::string>{"last_not_assistant"});
  auto e = validate_sft(chat({{"user", "a"}, {"assistant", "b"}, {"assistant", "c"}}), rules);
  REQUIRE(e.size() == 1);
  CHECK(e[0].field == "messages[2].role");
  annotation_rules lax;
  lax.require_alternation = false;
  lax.require_last_assistant = false;
  CHECK(validate_sft(chat({{"user", "a"}, {"user", "b"}, {"assistant", "c"}, {"user", "d"}}), lax).empty());
}

TEST_CASE("preference pairs need three non-empty strings and two different answers") {
  CHECK(validate_preference("Q?", "good", "bad").empty());
  CHECK(codes(validate_preference("", "good", "bad")) == std::vector<std::string>{"empty_prompt"});
  CHECK(codes(validate_preference("Q?", " ", "bad")) == std::vector<std::string>{"empty_chosen"});
  CHECK(codes(validate_preference("Q?", "same", "same")) == std::vector<std::string>{"chosen_equals_rejected"});
}

TEST_CASE("annotation errors reach the report with their line numbers and a pass rate") {
  temp_dir t("loom-ingest-ann");
  write_file(t.path() + "/sft.jsonl",
             R"({"messages": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}]})" "\n"
             R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "bot", "content": "Hello"}]})" "\n"
             "\n"
             R"({"prompt": "Pick one", "chosen": "Same  answer", "rejected": "Same answer"})" "\n"
             R"({"prompt": "Pick one", "chosen": "Tea", "rejected": "Coffee"})" "\n"
             R"({"messages": [{"role": "user", "content": ["not", "a", "string"]}]})" "\n"
             R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]})" "\n");
  pipeline p;
  run_import(t.path(), {}, p);
  const auto& r = p.report();
  CHECK(r.annotations.sft_records == 4);
  CHECK(r.annotations.sft_valid == 1);
  CHECK(r.annotations.preference_records == 2);
  CHECK(r.annotations.preference_valid == 1);
  CHECK(r.annotations.pass_rate() == doctest::Approx(2.0 / 6.0));
  std::vector<std::tuple<std::uint64_t, std::string, std::string>> got;
  for (const auto& l : r.problems) got.emplace_back(l.line, l.stage, l.code);
  // Line 4: cleaning collapsed the double space, so chosen == rejected.
  CHECK(got == std::vector<std::tuple<std::uint64_t, std::string, std::string>>{
                   {2, "annotation", "bad_role"},
                   {2, "annotation", "no_assistant_turn"},
                   {2, "rejected", "annotation_bad_role"},
                   {4, "annotation", "chosen_equals_rejected"},
                   {4, "rejected", "annotation_chosen_equals_rejected"},
                   {6, "reader", "json_wrong_type"},
                   {7, "annotation", "not_alternating"},
                   {7, "rejected", "annotation_not_alternating"},
               });
  auto j = nlohmann::json::parse(r.to_json());
  CHECK(j["annotations"]["pass_rate"].get<double>() == doctest::Approx(1.0 / 3.0));
  CHECK(j["annotations"]["errors_by_code"]["json_wrong_type"] == 1);
  CHECK(j["documents"]["kept"] == 2);
}
