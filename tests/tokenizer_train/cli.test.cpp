// `loom data train-tokenizer` end to end (its summary, determinism, exit codes),
// its tokenizer.json against an independent implementation -- Hugging Face's
// tokenizers.js (npm @huggingface/tokenizers, scripts/install-vocab) under node
// -- and `loom-trainer` training and sampling with it as data.tokenizer.
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "tests/support/harness.hpp"
#include "tests/tokenizer/corpus.hpp"
#include "tests/tokenizer_train/common.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace loom;
using namespace loom::test;
using namespace loom::test::tok_train;
using ids = std::vector<std::uint32_t>;

namespace {

constexpr const char* npm_modules = "/usr/local/lib/edgeloom/npm/node_modules";
const std::string licenses = "/usr/share/common-licenses";

run_result train(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {bin("loom"), "data", "train-tokenizer"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run(argv, std::chrono::seconds(120));
}

// Bytes `loom data train-tokenizer DIR` reads: every regular file, symlinks followed.
std::uint64_t dir_bytes(const std::string& dir) {
  std::uint64_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += std::filesystem::file_size(e.path());
  return n;
}

// hf_oracle.js on `docs` with `tokenizer_json`; their ids in order.
std::vector<ids> hf_oracle(const std::string& tokenizer_json, const std::vector<std::string>& docs) {
  temp_dir dir("loom-hf-oracle");
  std::string in;
  for (const auto& d : docs) loom::test::tok::append_frame(in, d);
  write_all(dir.path() + "/in.bin", in);
  ::setenv("NODE_PATH", npm_modules, 1);
  auto r = run({"/usr/bin/env", "node", std::string(LOOM_TOKENIZER_TRAIN_TEST_DIR) + "/hf_oracle.js", tokenizer_json,
                dir.path() + "/in.bin", dir.path() + "/out.bin"},
               std::chrono::seconds(240));
  REQUIRE_MESSAGE(r.code == 0, "hf_oracle.js failed (node and " << npm_modules
                                   << "/@huggingface/tokenizers come from scripts/install-vocab): " << r.err);
  auto all = loom::test::tok::parse_ids(read_all(dir.path() + "/out.bin"));
  REQUIRE(all.has_value());
  REQUIRE(all->size() == docs.size());
  return std::move(*all);
}

// Our ids and the oracle's on every document; reports how many agree.
void compare_with_oracle(const std::string& tokenizer_json, const std::vector<std::string>& docs) {
  auto ours = tokenizer::load_hf_json(tokenizer_json);
  REQUIRE_MESSAGE(ours.ok(), ours.err().to_string());
  const auto want = hf_oracle(tokenizer_json, docs);
  std::size_t same = 0, tokens = 0;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    if (ours->encode(docs[i]) == want[i]) ++same;
    else if (i - same < 3) FAIL_CHECK("document " << i << " differs: " << docs[i].substr(0, 120));
    tokens += want[i].size();
  }
  MESSAGE(tokenizer_json << ": " << same << " of " << docs.size() << " documents identical (" << tokens << " tokens)");
  CHECK(same == docs.size());
}

std::vector<std::string> oracle_docs(std::uint64_t seed, int random_count) {
  std::vector<std::string> docs = license_texts();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < random_count; ++i) docs.push_back(random_text(rng, 300));
  return docs;
}

}  // namespace

TEST_CASE("loom data train-tokenizer trains a directory to the asked vocabulary and prints its summary") {
  temp_dir dir("loom-train-tok");
  const std::string out = dir.path() + "/tok.json";
  auto r = train({"--vocab-size", "1000", licenses, "--out", out});
  INFO(r.err);
  REQUIRE(r.code == 0);
  MESSAGE(r.out);
  CHECK(r.out.find("wrote " + out + ": vocab 1000 (256 bytes + 743 merges + <|endoftext|> = 999)") == 0);
  CHECK(r.out.find("bytes/token on the input") != std::string::npos);
  auto b = tokenizer::load_hf_json(out);
  REQUIRE(b.ok());
  CHECK(b->vocab_size() == 1000);

  auto j = train({"--vocab-size", "1000", licenses, "--out", dir.path() + "/again.json", "--json"});
  REQUIRE(j.code == 0);
  const auto s = nlohmann::json::parse(j.out);
  CHECK(s["vocab_size"] == 1000);
  CHECK(s["merges"] == 743);
  CHECK(s["end_of_text_id"] == 999);
  CHECK(s["stopped_early"] == false);
  CHECK(s["input_bytes"] == dir_bytes(licenses));
  CHECK(s["bytes_per_token"].get<double>() > 2.5);
  CHECK(s["tokens"].get<double>() * s["bytes_per_token"].get<double>() ==
        doctest::Approx(s["input_bytes"].get<double>()));
  CHECK(read_all(out) == read_all(dir.path() + "/again.json"));  // deterministic, byte for byte
}

TEST_CASE("loom data train-tokenizer reads a single file, and a directory recursively in path order") {
  temp_dir dir("loom-train-tok");
  std::filesystem::create_directories(dir.path() + "/in/sub");
  const std::string gpl = read_all(licenses + "/GPL-3");
  write_all(dir.path() + "/in/b.txt", gpl.substr(0, gpl.size() / 2));
  write_all(dir.path() + "/in/sub/a.txt", gpl.substr(gpl.size() / 2));
  write_all(dir.path() + "/one.txt", gpl);
  auto d = train({"--vocab-size", "600", dir.path() + "/in", "--out", dir.path() + "/d.json", "--json"});
  REQUIRE(d.code == 0);
  CHECK(nlohmann::json::parse(d.out)["files"] == 2);
  CHECK(nlohmann::json::parse(d.out)["input_bytes"] == gpl.size());
  auto f = train({"--vocab-size", "600", dir.path() + "/one.txt", "--out", dir.path() + "/f.json", "--json",
                  "--min-frequency", "3"});
  REQUIRE(f.code == 0);
  CHECK(nlohmann::json::parse(f.out)["files"] == 1);
  CHECK(nlohmann::json::parse(f.out)["vocab_size"] == 600);
}

TEST_CASE("loom data train-tokenizer: bad usage exits 2, bad input exits 1, each with a reason") {
  temp_dir dir("loom-train-tok");
  const std::string out = dir.path() + "/t.json";
  write_all(dir.path() + "/empty.txt", "");
  std::filesystem::create_directories(dir.path() + "/nothing");
  struct bad_case {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  const std::vector<bad_case> cases = {
      {{licenses, "--out", out}, 2, "--vocab-size is required"},
      {{"--vocab-size", "256", licenses, "--out", out}, 2, "from 257 to 1048576"},
      {{"--vocab-size", "1048577", licenses, "--out", out}, 2, "not '1048577'"},
      {{"--vocab-size", "12k", licenses, "--out", out}, 2, "not '12k'"},
      {{"--vocab-size", "1000", "--out", out}, 2, "missing PATH"},
      {{"--vocab-size", "1000", licenses, "--out", out, "--merges", "3"}, 2, "unknown option --merges"},
      {{"--vocab-size", "1000", licenses, "--out", out, "--min-frequency", "0"}, 2, "--min-frequency"},
      {{"--vocab-size", "1000", dir.path() + "/missing.txt", "--out", out}, 1, dir.path() + "/missing.txt"},
      {{"--vocab-size", "1000", dir.path() + "/empty.txt", "--out", out}, 1, "no text to train on"},
      {{"--vocab-size", "1000", dir.path() + "/nothing", "--out", out}, 1, "no text to train on"},
      {{"--vocab-size", "1000", licenses, "--out", dir.path() + "/no/such/dir/t.json"}, 1, "cannot write"},
  };
  for (const auto& c : cases) {
    auto r = train(c.args);
    CAPTURE(r.err);
    CAPTURE(c.says);
    CHECK(r.code == c.code);
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK(r.out.empty());
  }
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("loom data train-tokenizer never writes over its input, into a data dir's keys, or over a file without --force") {
  temp_dir dir("loom-train-tok");
  const std::string home = dir.path() + "/home";
  REQUIRE(run({bin("loom"), "keys", "init", "--data-dir", home}).code == 0);
  const std::string key = home + "/keys/token.key", key_bytes = read_all(key);
  const std::string in = dir.path() + "/in.txt";
  write_all(in, read_all(licenses + "/GPL-3"));
  const std::string in_bytes = read_all(in);
  auto tok = [&](std::vector<std::string> extra, const std::string& data_dir) {
    extra.insert(extra.begin(), {"--vocab-size", "300", in});
    extra.insert(extra.end(), {"--data-dir", data_dir});
    return train(extra);
  };
  struct refused {
    std::vector<std::string> args;
    std::string data_dir;
    int code;
    std::string says;
  };
  REQUIRE(::symlink(key.c_str(), (dir.path() + "/innocent.json").c_str()) == 0);
  const std::vector<refused> cases = {
      {{"--out", in}, home, 1, "--out " + in + " is the input " + in},
      {{"--out", in, "--force"}, home, 1, "is the input"},
      {{"--out", dir.path() + "/./in.txt", "--force"}, home, 1, "is the input"},
      {{"--out", key}, home, 3, "lies in " + home + "/keys"},
      {{"--out", key, "--force"}, home, 3, "--force or not"},
      {{"--out", home + "/keys/curve/new.key", "--force"}, home, 3, "lies in " + home + "/keys"},
      {{"--out", home + "/admin.token", "--force"}, home, 3, "lies in " + home + "/admin.token"},
      {{"--out", key, "--force"}, dir.path() + "/elsewhere", 3, "lies in " + home + "/keys"},  // not the command's data dir
      {{"--out", dir.path() + "/innocent.json", "--force"}, home, 3, "lies in " + home + "/keys"},  // a link into keys/
  };
  for (const auto& c : cases) {
    auto r = tok(c.args, c.data_dir);
    CAPTURE(r.err);
    CAPTURE(c.says);
    CHECK(r.code == c.code);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
  CHECK(read_all(in) == in_bytes);
  CHECK(read_all(key) == key_bytes);
  struct stat st {};
  REQUIRE(::stat(key.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK_FALSE(std::filesystem::exists(home + "/keys/curve/new.key"));
  // An existing file: named and kept without --force, replaced with it.
  const std::string old = dir.path() + "/old.json";
  write_all(old, "old");
  auto kept = tok({"--out", old}, home);
  CHECK(kept.code == 1);
  CHECK(kept.err.find("--out " + old + " exists: pass --force to replace it") != std::string::npos);
  CHECK(read_all(old) == "old");
  auto replaced = tok({"--out", old, "--force"}, home);
  CHECK(replaced.code == 0);
  CHECK(tokenizer::load_hf_json(old).ok());
  // The owner's part of the data dir takes it (imports/: a job's data.tokenizer may be read there).
  std::filesystem::create_directories(home + "/imports");
  CHECK(tok({"--out", home + "/imports/tok.json"}, home).code == 0);
}

TEST_CASE("Hugging Face's tokenizers.js encodes with our trained tokenizer.json exactly as we do") {
  temp_dir dir("loom-train-tok");
  const auto docs = oracle_docs(0x4F5, 10000);
  for (const char* vocab : {"1000", "4000"}) {
    const std::string out = dir.path() + "/tok-" + vocab + ".json";
    REQUIRE(train({"--vocab-size", vocab, licenses, "--out", out}).code == 0);
    compare_with_oracle(out, docs);
  }
}

TEST_CASE("Hugging Face's tokenizers.js reads GPT-2 exported as tokenizer.json with GPT-2's ids") {
  auto gpt2 = tokenizer::bpe::load_gpt2();
  REQUIRE_MESSAGE(gpt2.ok(), gpt2.err().to_string());
  auto spec = tokenizer::spec_from_ranks(*gpt2);
  REQUIRE(spec.ok());
  temp_dir dir("loom-train-tok");
  const std::string path = dir.path() + "/gpt2.json";
  REQUIRE(tokenizer::write_hf_json(path, *spec).ok());
  const auto docs = oracle_docs(0x6B2, 2000);
  const auto want = hf_oracle(path, docs);
  std::size_t same = 0;
  for (std::size_t i = 0; i < docs.size(); ++i) same += gpt2->encode(docs[i]) == want[i];
  CHECK(same == docs.size());
}

TEST_CASE("loom-trainer trains with data.tokenizer and samples text back through it") {
  temp_dir dir("loom-train-tok");
  const std::string tok = dir.path() + "/tok.json";
  REQUIRE(train({"--vocab-size", "1000", licenses, "--out", tok}).code == 0);
  const auto config = [&](int vocab) {
    const std::string path = dir.path() + "/run-" + std::to_string(vocab) + ".toml";
    write_all(path, "[model]\nlayers = 1\nheads = 2\nchannels = 32\nmax_seq_len = 32\nvocab = " +
                        std::to_string(vocab) + "\n[data]\ntext = \"" + licenses + "/GPL-3\"\ntokenizer = \"" + tok +
                        "\"\n[train]\nbatch = 2\nseq_len = 32\nsteps = 4\nthreads = 2\n[checkpoint]\nevery_steps = 4\n");
    return path;
  };
  const std::string home = dir.path() + "/home";
  auto ok = run({bin("loom-trainer"), "train", "--config", config(1024), "--out", dir.path() + "/run", "--data-dir",
                 home, "--quiet", "--json"},
                std::chrono::seconds(240));
  INFO(ok.err);
  REQUIRE(ok.code == 0);
  CHECK(nlohmann::json::parse(ok.out)["steps"] == 4);

  auto s = run({bin("loom-trainer"), "sample", "--checkpoint", dir.path() + "/run/checkpoints", "--prompt",
                "This License", "--tokenizer", tok, "--max-tokens", "8", "--data-dir", home, "--json"},
               std::chrono::seconds(120));
  INFO(s.err);
  REQUIRE(s.code == 0);
  const auto j = nlohmann::json::parse(s.out);
  auto b = tokenizer::load_hf_json(tok);
  REQUIRE(b.ok());
  ids toks = j["tokens"].get<ids>();
  for (auto id : toks) CHECK(id < 999);
  CHECK(j["completion"] == b->decode(toks));

  auto small = run({bin("loom-trainer"), "train", "--config", config(512), "--out", dir.path() + "/small",
                    "--data-dir", home, "--quiet"},
                   std::chrono::seconds(120));
  CHECK(small.code == 1);
  CHECK(small.err.find("model.vocab 512") != std::string::npos);
  CHECK(small.err.find("data.tokenizer") != std::string::npos);

  // A --tokenizer that is not there is refused, naming it.
  auto mismatch = run({bin("loom-trainer"), "sample", "--checkpoint", dir.path() + "/run/checkpoints", "--prompt", "x",
                       "--tokenizer", dir.path() + "/missing.json", "--data-dir", home},
                      std::chrono::seconds(60));
  CHECK(mismatch.code == 1);
  CHECK(mismatch.err.find("missing.json") != std::string::npos);
}
