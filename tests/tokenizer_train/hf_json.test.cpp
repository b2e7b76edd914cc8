// tokenizer::load_hf_json and the tokenizer.json exporter: GPT-2's vocabulary
// exported from its tiktoken ranks and read back encodes exactly as the GPT-2
// encoder does (proves the loader's merge semantics on 50,000 real merges), and
// files of other kinds or with broken parts are refused, naming file and field.
#include "libs/files/temp_dir.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "tests/tokenizer_train/common.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

using namespace loom;
using namespace loom::tokenizer;
using namespace loom::test::tok_train;
using ids = std::vector<std::uint32_t>;

namespace {

const bpe& gpt2() {
  static const bpe b = [] {
    auto r = bpe::load_gpt2();
    if (!r) FAIL(r.err().to_string());
    return std::move(r).value();
  }();
  return b;
}

// A valid small tokenizer.json (trained on the licenses), as JSON to break.
nlohmann::json small_json() {
  static const std::string text = [] {
    piece_counts c;
    for (const auto& t : license_texts()) c.add_document(t);
    train_options o;
    o.vocab_size = 300;
    auto t = train_bpe(c, o);
    REQUIRE(t.ok());
    return to_hf_json(spec_of(*t));
  }();
  return nlohmann::json::parse(text);
}

// load_hf_json on `j` written to a file; the error (REQUIRES failure).
error load_error(const nlohmann::json& j, const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  write_all(path, j.dump());
  auto b = load_hf_json(path);
  REQUIRE_FALSE(b.ok());
  CHECK(b.err().message.find(path) != std::string::npos);  // names the file
  return b.err();
}

bool has(const error& e, const std::string& what) { return e.message.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("GPT-2's ranks exported as tokenizer.json load back to an encoder with GPT-2's ids on real text") {
  auto spec = spec_from_ranks(gpt2());
  REQUIRE_MESSAGE(spec.ok(), spec.err().to_string());
  CHECK(spec->tokens.size() == 50256);
  CHECK(spec->merges.size() == 50000);
  CHECK(spec->specials == std::vector<std::string>{"<|endoftext|>"});
  files::temp_dir dir("loom-hfjson");
  const std::string path = dir.path() + "/gpt2-tokenizer.json";
  REQUIRE(write_hf_json(path, *spec).ok());
  const auto j = nlohmann::json::parse(read_all(path));
  CHECK(j["model"]["merges"][0] == "Ġ t");  // GPT-2's merges.txt starts so
  CHECK(j["model"]["vocab"]["Ġthe"] == 262);
  auto b = load_hf_json(path);
  REQUIRE_MESSAGE(b.ok(), b.err().to_string());
  CHECK(b->vocab_size() == 50257);
  CHECK(b->special_id("<|endoftext|>") == 50256u);
  std::size_t tokens = 0;
  std::vector<ids> want;
  for (const auto& t : license_texts()) want.push_back(gpt2().encode(t));
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(b->encode(license_texts()[i]) == want[i]);
    tokens += want[i].size();
  }
  std::mt19937_64 rng(0x6B72);
  std::vector<std::string> texts;
  for (int i = 0; i < 3000; ++i) {
    texts.push_back(random_text(rng, 400));
    if (i % 3 == 0) texts.back() += std::string(1 + rng() % 80, static_cast<char>('a' + rng() % 3));  // the heap path
  }
  // One encoder after the other: each thread's piece cache serves one encoder at a time.
  std::vector<ids> got;
  for (const auto& s : texts) got.push_back(b->encode(s));
  for (std::size_t i = 0; i < texts.size(); ++i) {
    CAPTURE(texts[i]);
    REQUIRE(got[i] == gpt2().encode(texts[i]));
  }
  CHECK(tokens > 50000);
}

TEST_CASE("a tokenizer.json of another model type, pre-tokenizer or normalizer is refused, naming the field") {
  files::temp_dir dir("loom-hfjson");
  auto j = small_json();
  REQUIRE(load_hf_json((write_all(dir.path() + "/ok.json", j.dump()), dir.path() + "/ok.json")).ok());
  SUBCASE("WordPiece") {
    j["model"]["type"] = "WordPiece";
    const auto e = load_error(j, dir.path());
    CHECK(e.code == errc::unimplemented);
    CHECK(has(e, "model.type is \"WordPiece\""));
  }
  SUBCASE("a Metaspace pre-tokenizer") {
    j["pre_tokenizer"] = {{"type", "Metaspace"}};
    const auto e = load_error(j, dir.path());
    CHECK(e.code == errc::unimplemented);
    CHECK(has(e, "pre_tokenizer"));
  }
  SUBCASE("add_prefix_space") {
    j["pre_tokenizer"]["add_prefix_space"] = true;
    CHECK(has(load_error(j, dir.path()), "pre_tokenizer.add_prefix_space"));
  }
  SUBCASE("a normalizer") {
    j["normalizer"] = {{"type", "NFC"}};
    const auto e = load_error(j, dir.path());
    CHECK(e.code == errc::unimplemented);
    CHECK(has(e, "normalizer"));
  }
  SUBCASE("a template post-processor") {
    j["post_processor"] = {{"type", "TemplateProcessing"}};
    CHECK(has(load_error(j, dir.path()), "post_processor"));
  }
  SUBCASE("a non-special added token") {
    j["added_tokens"][0]["special"] = false;
    CHECK(has(load_error(j, dir.path()), "added_tokens[0]"));
  }
  SUBCASE("a vocabulary that is not byte-level") {
    j["model"]["vocab"]["▁the"] = 299;  // SentencePiece's word mark
    j["model"]["vocab"]["<|endoftext|>"] = 300;
    j["added_tokens"][0]["id"] = 300;
    const auto e = load_error(j, dir.path());
    CHECK(e.code == errc::unimplemented);
    CAPTURE(e.message);
    CHECK(has(e, "not a byte-level token"));
  }
}

TEST_CASE("a tokenizer.json with a corrupted merges list or vocabulary is refused as corrupt") {
  files::temp_dir dir("loom-hfjson");
  auto j = small_json();
  SUBCASE("a merge without its space") {
    j["model"]["merges"][3] = "Ġthe";
    const auto e = load_error(j, dir.path());
    CHECK(e.code == errc::corruption);
    CHECK(has(e, "model.merges[3]"));
  }
  SUBCASE("a merge of a token that is not in the vocabulary") {
    j["model"]["merges"][5] = "Ġt zzzz";
    const auto e = load_error(j, dir.path());
    CHECK(e.code == errc::corruption);
    CHECK(has(e, "model.merges[5]"));
  }
  SUBCASE("a merge listed twice") {
    j["model"]["merges"].push_back(j["model"]["merges"][0]);
    const auto e = load_error(j, dir.path());
    CHECK(e.code == errc::corruption);
    CHECK(has(e, "twice"));
  }
  SUBCASE("merges out of order") {
    std::swap(j["model"]["merges"][0], j["model"]["merges"][1]);
    const auto e = load_error(j, dir.path());
    CHECK(e.code == errc::unimplemented);
    CHECK(has(e, "merge 1 makes token 256"));
  }
  SUBCASE("a merge that is not a string") {
    j["model"]["merges"][2] = 7;
    CHECK(load_error(j, dir.path()).code == errc::corruption);
  }
  SUBCASE("merges as [left, right] pairs (the format since tokenizers 0.20) load") {
    for (auto& m : j["model"]["merges"]) {
      const std::string s = m.get<std::string>();
      m = nlohmann::json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
    }
    write_all(dir.path() + "/pairs.json", j.dump());
    auto b = load_hf_json(dir.path() + "/pairs.json");
    REQUIRE(b.ok());
    CHECK(b->vocab_size() == 300);
  }
  SUBCASE("a missing id") {
    j["model"]["vocab"].erase("Ġt");
    CHECK(load_error(j, dir.path()).code == errc::unimplemented);
  }
  SUBCASE("not JSON") {
    write_all(dir.path() + "/tokenizer.json", "{\"model\": ");
    auto b = load_hf_json(dir.path() + "/tokenizer.json");
    REQUIRE_FALSE(b.ok());
    CHECK(b.code() == errc::corruption);
  }
  SUBCASE("a field of the wrong type") {
    j["model"]["vocab"] = "none";
    CHECK(load_error(j, dir.path()).code == errc::corruption);
  }
}

TEST_CASE("load_hf_json of a missing file is not_found naming it") {
  auto b = load_hf_json("/nonexistent/tokenizer.json");
  REQUIRE_FALSE(b.ok());
  CHECK(b.code() == errc::not_found);
  CHECK(has(b.err(), "/nonexistent/tokenizer.json"));
}
