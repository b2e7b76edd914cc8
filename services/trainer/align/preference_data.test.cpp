// Preference records: the JSONL reader and its errors, rendering and the
// pair-batch layout (response masks, last tokens, truncation), and the
// synthetic set (deterministic, rule-following, a disjoint held-out split).
#include "services/trainer/align/preference_data.hpp"

#include "services/trainer/align/pair_stream.hpp"
#include "services/trainer/align/synthetic_prefs.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace loom::align;

TEST_CASE("preference JSONL reads prompt, chosen and rejected and round-trips") {
  const std::string jsonl =
      "{\"prompt\":\"hi\",\"chosen\":\"hello!\",\"rejected\":\"go away\"}\n\n"
      "{\"prompt\":\"2+2?\",\"chosen\":\"4\",\"rejected\":\"5\",\"extra\":1}\n";
  auto r = preferences_from_jsonl(jsonl, "p.jsonl");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  CHECK((*r)[0].chosen == "hello!");
  CHECK((*r)[1].rejected == "5");
  auto again = preferences_from_jsonl(preferences_to_jsonl(*r), "x");
  REQUIRE(again.ok());
  CHECK((*again)[1].prompt == "2+2?");
}

TEST_CASE("a preference record missing a field is refused naming the file, the line and the field") {
  const std::string jsonl =
      "{\"prompt\":\"a\",\"chosen\":\"b\",\"rejected\":\"c\"}\n"
      "{\"prompt\":\"a\",\"chosen\":\"b\"}\n";
  auto r = preferences_from_jsonl(jsonl, "prefs.jsonl");
  REQUIRE(!r.ok());
  CHECK(r.code() == loom::errc::invalid_argument);
  CHECK(r.err().message.find("prefs.jsonl:2") != std::string::npos);
  CHECK(r.err().message.find("\"rejected\"") != std::string::npos);
  auto n = preferences_from_jsonl("{\"prompt\":1,\"chosen\":\"b\",\"rejected\":\"c\"}", "f");
  REQUIRE(!n.ok());
  CHECK(n.err().message.find("f:1: the field \"prompt\" must be a string") != std::string::npos);
  CHECK(!preferences_from_jsonl("not json\n", "f").ok());
  CHECK(read_preferences("/nonexistent/prefs.jsonl").code() == loom::errc::not_found);
}

TEST_CASE("a pair batch puts chosen rows first and masks exactly the response targets") {
  const preference_record rec{"ab", "cd", "e"};
  const pair_tokens t = render_pair(rec, encode_bytes, {"", ":", '\n'});
  CHECK(t.prompt == encode_bytes("ab:"));
  CHECK(t.chosen == std::vector<std::int32_t>{'c', 'd', '\n'});
  auto b = make_pair_batch(std::span(&t, 1), 8);
  REQUIRE(b.ok());
  // row 0: "ab:cd\n" → targets "b:cd\n", response targets c, d, \n at t = 2, 3, 4
  CHECK(std::vector<std::int32_t>(b->inputs.begin(), b->inputs.begin() + 6) == encode_bytes("ab:cd\n"));
  CHECK(std::vector<float>(b->mask.begin(), b->mask.begin() + 8) == std::vector<float>{0, 0, 1, 1, 1, 0, 0, 0});
  CHECK(b->targets[2] == 'c');
  CHECK(b->last[0] == 5);
  // row 1: "ab:e\n"
  CHECK(std::vector<float>(b->mask.begin() + 8, b->mask.end()) == std::vector<float>{0, 0, 1, 1, 0, 0, 0, 0});
  CHECK(b->last[1] == 4);
}

TEST_CASE("a pair longer than the window loses the start of its prompt, never its response") {
  const pair_tokens t{encode_bytes("0123456789"), encode_bytes("xyz"), encode_bytes("q")};
  auto b = make_pair_batch(std::span(&t, 1), 6);
  REQUIRE(b.ok());
  CHECK(std::vector<std::int32_t>(b->inputs.begin(), b->inputs.begin() + 6) == encode_bytes("789xyz"));
  CHECK(b->last[0] == 5);
  const pair_tokens empty{encode_bytes("p"), {}, encode_bytes("q")};
  CHECK(make_pair_batch(std::span(&empty, 1), 6).code() == loom::errc::invalid_argument);
  CHECK(make_pair_batch({}, 6).code() == loom::errc::invalid_argument);
}

TEST_CASE("the synthetic preference set is deterministic, follows its rule and holds out unseen words") {
  const synthetic_options o{200, 50, 3};
  const preference_split a = synthetic_preferences(o), b = synthetic_preferences(o);
  REQUIRE(a.train.size() == 200);
  REQUIRE(a.held_out.size() == 50);
  CHECK(preferences_to_jsonl(a.train) == preferences_to_jsonl(b.train));
  CHECK(preferences_to_jsonl(synthetic_preferences({200, 50, 4}).train) != preferences_to_jsonl(a.train));
  std::set<std::string> train_prompts;
  int kinds[3] = {0, 0, 0};
  for (const auto& r : a.train) {
    train_prompts.insert(r.prompt);
    CHECK(synthetic_rule_score(r.prompt, r.chosen) == 1.0);
    const double s = synthetic_rule_score(r.prompt, r.rejected);
    CHECK(s < 1.0);
    const std::string w = r.prompt.substr(6);
    ++kinds[r.rejected == w + "!" ? 1 : r.rejected.back() == '.' ? 2 : 0];  // another word / lower case / wrong ending
    if (kinds[1] && r.rejected == w + "!") CHECK(s == 0.75);
  }
  for (int k : kinds) CHECK(k > 40);
  for (const auto& r : a.held_out) CHECK(train_prompts.count(r.prompt) == 0);
  CHECK(synthetic_rule_score("shout abc", "ABc!") == doctest::Approx(0.5 * 2.5 / 3 + 0.5));
  CHECK(synthetic_rule_score("shout abc", "ABC.") == doctest::Approx(0.5));
  CHECK(synthetic_rule_score("shout abc", "XYZ!") == doctest::Approx(0.5));
  CHECK(synthetic_rule_score("shout abc", "ABCD!") == doctest::Approx(0.5));
}

TEST_CASE("a pair stream resumed from its cursor yields the batches an uninterrupted one does") {
  std::vector<pair_tokens> pairs;
  for (int i = 0; i < 10; ++i) pairs.push_back({encode_bytes("p" + std::to_string(i)), encode_bytes("c"), encode_bytes("r")});
  auto a = pair_stream::create(pairs, 3, 8, 5), b = pair_stream::create(pairs, 3, 8, 5);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<std::vector<std::int32_t>> straight;
  for (int i = 0; i < 8; ++i) straight.push_back(a->next()->inputs);  // crosses two epoch ends (3 batches each)
  for (int i = 0; i < 4; ++i) REQUIRE(b->next().ok());
  const pair_cursor at = b->position();
  CHECK(at.epoch == 1);
  CHECK(at.next == 3);
  auto c = pair_stream::create(pairs, 3, 8, 5);
  REQUIRE(c->seek(at).ok());
  for (int i = 4; i < 8; ++i) CHECK(c->next()->inputs == straight[std::size_t(i)]);
  CHECK(straight[0] != straight[3]);  // each epoch reshuffles
  CHECK(c->seek({0, 11}).code() == loom::errc::invalid_argument);
  CHECK(pair_stream::create(pairs, 11, 8, 5).code() == loom::errc::invalid_argument);
}

TEST_CASE("the held-out split is deterministic, keeps a prompt on one side and holds out about the fraction asked") {
  std::vector<preference_record> recs;
  for (int i = 0; i < 1000; ++i) recs.push_back({"prompt " + std::to_string(i % 500), "a", "b"});
  const auto [train, held] = split_held_out(recs, 0.2, 9);
  CHECK(train.size() + held.size() == 1000);
  CHECK(held.size() > 140);
  CHECK(held.size() < 260);
  std::set<std::string> held_prompts;
  for (const auto& r : held) held_prompts.insert(r.prompt);
  for (const auto& r : train) CHECK(held_prompts.count(r.prompt) == 0);
  CHECK(split_held_out(recs, 0.2, 9).second.size() == held.size());
}
