// data.tokenizer: a run tokenizes its text (LM and SFT) with a trained
// tokenizer.json instead of GPT-2, the model's vocabulary must hold it, and the
// cache of tokenized text notices a different tokenizer.
#include "libs/files/temp_dir.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/tokenizer/train/bpe_train.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "libs/tokenizer/train/piece_counts.hpp"
#include "libs/runspec/run_config.hpp"
#include "services/trainer/run/sft_data.hpp"
#include "services/trainer/run/text_data.hpp"
#include "services/trainer/run/training_run.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <span>
#include <sstream>

using namespace loom;
using namespace loom::trainer;

namespace {

const std::string corpus = "/usr/share/common-licenses/GPL-3";

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A tokenizer.json of `vocab` tokens trained on the corpus, written under dir.
std::string trained_tokenizer(const std::string& dir, std::size_t vocab) {
  tokenizer::piece_counts c;
  c.add_document(read_all(corpus));
  tokenizer::train_options o;
  o.vocab_size = vocab;
  auto t = tokenizer::train_bpe(c, o);
  REQUIRE(t.ok());
  const std::string path = dir + "/tokenizer-" + std::to_string(vocab) + ".json";
  REQUIRE(tokenizer::write_hf_json(path, tokenizer::spec_of(*t)).ok());
  return path;
}

std::string config(int vocab, const std::string& tok) {
  return "[model]\nlayers = 1\nheads = 2\nchannels = 32\nmax_seq_len = 32\nvocab = " + std::to_string(vocab) +
         "\n[data]\ntext = \"" + corpus + "\"\ntokenizer = \"" + tok +
         "\"\n[train]\nbatch = 2\nseq_len = 32\nsteps = 3\nthreads = 2\n[checkpoint]\nevery_steps = 3\n";
}

std::vector<std::uint32_t> shard_ids(const std::string& dir) {
  auto ds = shards::dataset::open(dir);
  REQUIRE(ds.ok());
  std::vector<std::uint32_t> ids(ds->token_count());
  REQUIRE(ds->read(0, ids).ok());
  return ids;
}

}  // namespace

TEST_CASE("a run with data.tokenizer tokenizes data.text with it and trains a model of that vocabulary") {
  files::temp_dir tmp("loom-tokopt");
  const std::string tok = trained_tokenizer(tmp.path(), 1000);
  auto c = runspec::parse_run_config(config(1024, tok), "/t/run.toml", {"output.dir=" + tmp.path() + "/run"});
  REQUIRE_MESSAGE(c.ok(), c.err().to_string());
  CHECK(c->tokenizer == tok);
  run_options o;
  o.data_dir = tmp.path() + "/home";
  auto s = run_training(*c, o);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  CHECK(s->steps == 3);
  CHECK(std::isfinite(s->last_loss));

  const auto ids = shard_ids(tmp.path() + "/run/data");
  REQUIRE(ids.size() > 1000);
  CHECK(ids[0] == 999);  // <|endoftext|>, the trained tokenizer's last id
  for (std::size_t i = 1; i < ids.size(); ++i) REQUIRE(ids[i] < 999);
  auto b = load_run_tokenizer(tok);
  REQUIRE(b.ok());
  CHECK(b->decode(std::span(ids).subspan(1)) == read_all(corpus));
  // GPT-2 needs far more tokens for the same text.
  auto gpt2 = tokenizer::bpe::load_gpt2();
  REQUIRE(gpt2.ok());
  CHECK(ids.size() - 1 > gpt2->encode(read_all(corpus)).size());
  CHECK(c->math_hash() != runspec::parse_run_config(config(1024, tok), "/t/run.toml", {"data.tokenizer="})->math_hash());
}

// What the trainer does with a config: parse it, then check the files it names.
static result<runspec::run_config> parse_checked(const std::string& toml) {
  auto c = runspec::parse_run_config(toml, "/t/run.toml");
  if (!c) return c;
  if (auto st = runspec::check_run_files(*c, "/t/run.toml"); !st) return st.err();
  return c;
}

TEST_CASE("model.vocab smaller than data.tokenizer's vocabulary is refused, naming both keys") {
  files::temp_dir tmp("loom-tokopt");
  const std::string tok = trained_tokenizer(tmp.path(), 1000);
  auto c = parse_checked(config(512, tok));
  REQUIRE_FALSE(c.ok());
  CHECK(c.code() == errc::invalid_argument);
  CHECK(c.err().message.find("model.vocab 512 is smaller than data.tokenizer's 1000 tokens") != std::string::npos);
  CHECK(parse_checked(config(1000, tok)).ok());  // exactly its size fits

  auto missing = parse_checked(config(1024, tmp.path() + "/none.json"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.code() == errc::not_found);
  CHECK(missing.err().message.find("data.tokenizer") != std::string::npos);
  CHECK(missing.err().message.find("none.json") != std::string::npos);

  std::ofstream(tmp.path() + "/wordpiece.json")
      << R"({"model":{"type":"WordPiece","vocab":{"a":0}},"pre_tokenizer":null,"decoder":null})";
  auto wp = parse_checked(config(1024, tmp.path() + "/wordpiece.json"));
  REQUIRE_FALSE(wp.ok());
  CHECK(wp.code() == errc::unimplemented);
  CHECK(wp.err().message.find("wordpiece.json") != std::string::npos);
}

TEST_CASE("SFT records use data.tokenizer too, and a different tokenizer re-tokenizes the cached text") {
  files::temp_dir tmp("loom-tokopt");
  const std::string small = trained_tokenizer(tmp.path(), 600);
  const std::string large = trained_tokenizer(tmp.path(), 900);
  auto dir = prepare_sft_dataset(corpus, true, tmp.path() + "/sft", small);
  REQUIRE(dir.ok());
  auto ids = shard_ids(*dir);
  REQUIRE(!ids.empty());
  CHECK((ids.back() & ~sft_masked_bit) == 599);
  for (auto id : ids) REQUIRE((id & ~sft_masked_bit) < 600);

  auto a = prepare_text_dataset(corpus, tmp.path() + "/lm", small);
  REQUIRE(a.ok());
  const auto with_small = shard_ids(*a);
  auto b = prepare_text_dataset(corpus, tmp.path() + "/lm", large);
  REQUIRE(b.ok());
  const auto with_large = shard_ids(*b);
  CHECK(with_small[0] == 599);
  CHECK(with_large[0] == 899);
  CHECK(with_large.size() < with_small.size());
}
