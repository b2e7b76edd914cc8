// Cross-process oracle tests: the ids of libs/tokenizer and of `loom tokenize`
// against tiktoken's gpt2 encoding (npm tiktoken run by oracle.js under node),
// on text generated here from fixed seeds. Needs scripts/install-vocab.
#include "libs/tokenizer/bpe.hpp"
#include "tests/support/harness.hpp"
#include "tests/tokenizer/corpus.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace loom;
using namespace loom::test;
using ids = std::vector<std::uint32_t>;

namespace {

constexpr const char* npm_modules = "/usr/local/lib/edgeloom/npm/node_modules";
constexpr std::uint64_t corpus_seed = 0x6A7E2024;
constexpr std::size_t corpus_bytes = 12'000'000;  // the issue asks for >= 10 MB

const tokenizer::bpe& gpt2() {
  static const tokenizer::bpe b = [] {
    auto r = tokenizer::bpe::load_gpt2();
    if (!r) FAIL(r.err().to_string());
    return std::move(r).value();
  }();
  return b;
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  REQUIRE(f.good());
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs oracle.js on the documents; their ids in order.
std::vector<ids> oracle(const std::vector<tok::document>& docs) {
  temp_dir dir("loom-tok-oracle");
  std::string in;
  for (const auto& d : docs) tok::append_frame(in, d.text);
  write_file(dir.path() + "/in.bin", in);
  ::setenv("NODE_PATH", npm_modules, 1);
  auto r = run({"/usr/bin/env", "node", std::string(LOOM_TOKENIZER_TEST_DIR) + "/oracle.js", dir.path() + "/in.bin",
                dir.path() + "/out.bin"},
               std::chrono::seconds(240));
  REQUIRE_MESSAGE(r.code == 0, "oracle.js failed (node and " << npm_modules
                                   << "/tiktoken come from scripts/install-vocab): " << r.err);
  auto all = tok::parse_ids(read_all(dir.path() + "/out.bin"));
  REQUIRE(all.has_value());
  REQUIRE(all->size() == docs.size());
  return std::move(*all);
}

std::string escaped(std::string_view s) {
  std::string o;
  char buf[8];
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') o += static_cast<char>(c);
    else std::snprintf(buf, sizeof buf, "\\x%02X", c), o += buf;
  }
  return o;
}

// "" when equal, else where they first differ, with the text around it.
std::string first_mismatch(const tok::document& d, std::size_t index, const ids& ours, const ids& theirs) {
  if (ours == theirs) return {};
  std::size_t i = 0, offset = 0;
  while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) offset += gpt2().token_bytes(ours[i++]).size();
  auto show = [&](const ids& v) {
    std::string s;
    for (std::size_t k = i; k < std::min(v.size(), i + 8); ++k)
      s += std::to_string(v[k]) + "(" + escaped(gpt2().token_bytes(v[k])) + ") ";
    return s;
  };
  const std::size_t from = offset > 40 ? offset - 40 : 0;
  return "document " + std::to_string(index) + " (" + d.kind + ", " + std::to_string(d.text.size()) +
         " bytes): first difference at token " + std::to_string(i) + ", byte " + std::to_string(offset) +
         "\n  text: ..." + escaped(std::string_view(d.text).substr(from, offset - from)) + "[HERE]" +
         escaped(std::string_view(d.text).substr(offset, 40)) + "...\n  ours:     " + show(ours) +
         "\n  tiktoken: " + show(theirs);
}

// Compares every document; reports the count and the first mismatch.
void compare_all(const std::vector<tok::document>& docs, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto want = oracle(docs);
  const auto t1 = std::chrono::steady_clock::now();
  std::size_t same = 0, bytes = 0, tokens = 0;
  std::string first;
  ids got;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    got.clear();
    gpt2().encode_into(docs[i].text, got);
    bytes += docs[i].text.size();
    tokens += got.size();
    const std::string m = first_mismatch(docs[i], i, got, want[i]);
    if (m.empty()) ++same;
    else if (first.empty()) first = m;
  }
  const auto t2 = std::chrono::steady_clock::now();
  MESSAGE(std::string(what) << ": " << same << "/" << docs.size() << " documents identical, " << bytes / 1e6 << " MB, " << tokens
               << " ids; tiktoken " << std::chrono::duration<double>(t1 - t0).count() << " s, ours "
               << std::chrono::duration<double>(t2 - t1).count() << " s");
  CHECK_MESSAGE(same == docs.size(), first);
}

}  // namespace

TEST_CASE("ids equal tiktoken's gpt2 on 12 MB of generated text of every kind") {
  const auto docs = tok::generate(corpus_seed, corpus_bytes);
  std::size_t bytes = 0;
  for (const auto& d : docs) bytes += d.text.size();
  REQUIRE(bytes >= 10'000'000);
  compare_all(docs, "corpus");
}

TEST_CASE("every Unicode scalar value splits as tiktoken splits it") {
  compare_all(tok::code_point_sweep(), "code points");
}

TEST_CASE("loom tokenize prints tiktoken's ids per document and --decode gives the text back") {
  temp_dir dir("loom-tok-cli");
  auto docs = tok::generate(corpus_seed + 1, 400'000);
  const auto want = oracle(docs);

  // JSONL: one line of ids per record, from field "body".
  std::string jsonl;
  for (const auto& d : docs) jsonl += nlohmann::json{{"id", 1}, {"body", d.text}}.dump() + "\n";
  write_file(dir.path() + "/docs.jsonl", jsonl);
  auto r = run({bin("loom"), "tokenize", "--field", "body", dir.path() + "/docs.jsonl"}, std::chrono::seconds(60));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  std::istringstream lines(r.out);
  std::string line;
  std::size_t n = 0;
  for (; std::getline(lines, line); ++n) {
    REQUIRE(n < docs.size());
    ids got;
    std::istringstream nums(line);
    for (std::uint32_t id; nums >> id;) got.push_back(id);
    REQUIRE_MESSAGE(got == want[n], first_mismatch(docs[n], n, got, want[n]));
  }
  CHECK(n == docs.size());

  // Decoding those lines gives one document per line; with --field, JSONL records.
  write_file(dir.path() + "/docs.ids", r.out);
  auto back = run({bin("loom"), "tokenize", "--decode", dir.path() + "/docs.ids", "--field", "body"},
                  std::chrono::seconds(60));
  REQUIRE(back.code == 0);
  std::istringstream recs(back.out);
  for (std::size_t i = 0; i < docs.size(); ++i) {
    REQUIRE(std::getline(recs, line));
    REQUIRE(nlohmann::json::parse(line)["body"].get<std::string>() == docs[i].text);
  }

  // A plain file is one document; arbitrary bytes (invalid UTF-8) come back exactly.
  std::string bytes(300'000, '\0');
  std::uint64_t x = 42;
  for (auto& c : bytes) c = static_cast<char>((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 56);
  write_file(dir.path() + "/blob.bin", bytes);
  r = run({bin("loom"), "tokenize", dir.path() + "/blob.bin"});
  REQUIRE(r.code == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  write_file(dir.path() + "/blob.ids", r.out);
  back = run({bin("loom"), "tokenize", "--decode", dir.path() + "/blob.ids"});
  REQUIRE(back.code == 0);
  CHECK(back.out == bytes);
}

TEST_CASE("loom tokenize exits 1 for a missing vocabulary or file and 2 for bad usage") {
  temp_dir dir("loom-tok-cli");
  write_file(dir.path() + "/a.txt", "hello");
  auto r = run({bin("loom"), "tokenize", dir.path() + "/missing.txt"});
  CHECK(r.code == 1);
  CHECK(r.err.find("missing.txt") != std::string::npos);
  CHECK(run({bin("loom"), "tokenize"}).code == 2);
  CHECK(run({bin("loom"), "tokenize", "--encoding", "cl100k_base", dir.path() + "/a.txt"}).code == 2);
  CHECK(run({bin("loom"), "tokenize", "--bogus", "1", dir.path() + "/a.txt"}).code == 2);

  const char* old = std::getenv("LOOM_GPT2_VOCAB");
  const std::string saved = old ? old : "";
  ::setenv("LOOM_GPT2_VOCAB", (dir.path() + "/nope.json").c_str(), 1);
  r = run({bin("loom"), "tokenize", dir.path() + "/a.txt"});
  if (old) ::setenv("LOOM_GPT2_VOCAB", saved.c_str(), 1);
  else ::unsetenv("LOOM_GPT2_VOCAB");
  CHECK(r.code == 1);
  CHECK(r.err.find("LOOM_GPT2_VOCAB") != std::string::npos);
  CHECK(r.err.find(tokenizer::gpt2_vocab_default_path) != std::string::npos);
}
