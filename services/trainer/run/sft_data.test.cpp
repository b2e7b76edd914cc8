#include "services/trainer/run/sft_data.hpp"

#include "libs/files/temp_dir.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/shards/writer.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/runspec/run_config.hpp"
#include "services/trainer/run/text_data.hpp"
#include "services/trainer/run/training_run.hpp"

#include <doctest/doctest.h>

#include <fstream>

using namespace loom;
using namespace loom::trainer;

TEST_CASE("records from text pair consecutive paragraphs and skip short ones") {
  auto r = records_from_text("First paragraph, long enough.\n\nok\n\nSecond paragraph, long enough.\n\nThird one here, also long.");
  REQUIRE(r.size() == 2);
  CHECK(r[0][0].role == "user");
  CHECK(r[0][0].content == "Continue the text:\nFirst paragraph, long enough.");
  CHECK(r[0][1].content == "Second paragraph, long enough.");
  CHECK(r[1][1].content == "Third one here, also long.");
  CHECK(records_from_text("only one paragraph here, though long").empty());
}

TEST_CASE("JSONL chat records are checked with the line of the first bad record") {
  auto ok = records_from_jsonl(
      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"hello\"}]}\n\n",
      "chat.jsonl");
  REQUIRE(ok.ok());
  CHECK(ok->size() == 1);
  auto msg = [](std::string_view text) {
    auto r = records_from_jsonl(text, "chat.jsonl");
    return r.ok() ? std::string("ok") : r.err().message;
  };
  CHECK(msg("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"x\"}]}\n"
            "{\"messages\":[{\"role\":\"robot\",\"content\":\"hi\"}]}\n")
            .find("chat.jsonl:2: unknown role \"robot\"") != std::string::npos);
  CHECK(msg("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}").find("at least one assistant") != std::string::npos);
  CHECK(msg("[1,2]").find("chat.jsonl:1: expected") != std::string::npos);
  CHECK(msg("{\"messages\":[{\"role\":\"user\",\"content\":3}]}").find("string") != std::string::npos);
}

namespace {

// An imported dataset as ingest writes it: <|endoftext|> before each document, GPT-2 ids.
void write_dataset(const std::string& dir, const std::vector<std::string>& docs) {
  auto bpe = tokenizer::bpe::load_gpt2();
  REQUIRE(bpe.ok());
  shards::writer_options o;
  o.dir = dir;
  auto w = shards::shard_writer::create(o);
  REQUIRE(w.ok());
  for (const auto& d : docs) {
    std::vector<std::uint32_t> ids{gpt2_eot};
    bpe->encode_into(d, ids);
    REQUIRE(w->append(ids).ok());
  }
  REQUIRE(w->finish().ok());
}

// The (user, assistant) texts of an SFT shard set, decoded.
std::vector<std::string> answers_of(const std::string& dir) {
  auto ds = shards::dataset::open(dir);
  REQUIRE(ds.ok());
  std::vector<std::uint32_t> ids(ds->token_count());
  REQUIRE(ds->read(0, ids).ok());
  auto bpe = tokenizer::bpe::load_gpt2();
  REQUIRE(bpe.ok());
  std::vector<std::string> out;
  std::vector<std::uint32_t> cur;
  for (auto id : ids) {
    if (id == gpt2_eot) {
      out.push_back(bpe->decode(cur));
      cur.clear();
    } else if (!(id & sft_masked_bit)) {
      cur.push_back(id);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("SFT data from an imported dataset pairs paragraphs within each document, never across two") {
  files::temp_dir tmp("loom-sft-ds");
  const std::string ds = tmp.path() + "/ds";
  write_dataset(ds, {"Alpha paragraph one, long enough.\n\nAlpha paragraph two, long enough.",
                     "Beta paragraph one, long enough.",
                     "Gamma paragraph one, long enough.\n\nGamma paragraph two, long enough.\n\nGamma three, long too."});
  auto dir = prepare_sft_from_dataset(ds, tmp.path() + "/out/data");
  REQUIRE(dir.ok());
  const auto got = answers_of(*dir);
  CHECK(got == std::vector<std::string>{"Alpha paragraph two, long enough.\n\n", "Gamma paragraph two, long enough.\n\n",
                                        "Gamma three, long too.\n\n"});
  // Documents of one paragraph each have no pair: a clear error, not an empty stage.
  const std::string lone = tmp.path() + "/lone";
  write_dataset(lone, {"Only one paragraph, long enough.", "Another single paragraph, long enough."});
  auto none = prepare_sft_from_dataset(lone, tmp.path() + "/out2/data");
  REQUIRE(!none.ok());
  CHECK(none.err().message.find("no SFT records") != std::string::npos);
}

TEST_CASE("SFT data from an imported dataset uses its records.jsonl, preference pairs as prompt and chosen answer") {
  files::temp_dir tmp("loom-sft-ds");
  const std::string ds = tmp.path() + "/ds";
  write_dataset(ds, {"ignored document text, long enough.\n\nsecond paragraph of it, long enough."});
  std::ofstream(ds + "/records.jsonl")
      << "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi?\"},{\"role\":\"assistant\",\"content\":\"Hello.\"}]}\n"
         "{\"prompt\":\"Pick one.\",\"chosen\":\"This one.\",\"rejected\":\"That one.\"}\n";
  auto dir = prepare_sft_from_dataset(ds, tmp.path() + "/out/data");
  REQUIRE(dir.ok());
  CHECK(answers_of(*dir) == std::vector<std::string>{"Hello.\n\n", "This one.\n\n"});
  auto bad = records_from_jsonl("{\"prompt\":\"p\",\"chosen\":3,\"rejected\":\"r\"}", "pairs.jsonl");
  REQUIRE(!bad.ok());
  CHECK(bad.err().message.find("pairs.jsonl:1: a preference pair needs string") != std::string::npos);
}

TEST_CASE("SFT shards mask the prompt and keep the answer and end-of-text as targets") {
  files::temp_dir tmp("loom-sft");
  const std::string src = tmp.path() + "/c.jsonl";
  std::ofstream(src) << "{\"messages\":[{\"role\":\"user\",\"content\":\"Say yes.\"},"
                        "{\"role\":\"assistant\",\"content\":\"Yes.\"}]}\n";
  auto dir = prepare_sft_dataset(src, false, tmp.path() + "/data");
  REQUIRE(dir.ok());
  auto ds = shards::dataset::open(*dir);
  REQUIRE(ds.ok());
  std::vector<std::uint32_t> ids(ds->token_count());
  REQUIRE(ds->read(0, ids).ok());
  auto bpe = tokenizer::bpe::load_gpt2();
  REQUIRE(bpe.ok());
  std::vector<std::uint32_t> plain, targets;
  for (auto id : ids) {
    plain.push_back(id & ~sft_masked_bit);
    if (!(id & sft_masked_bit)) targets.push_back(id);
  }
  CHECK(bpe->decode(std::span(plain).first(plain.size() - 1)) == "### User:\nSay yes.\n\n### Assistant:\nYes.\n\n");
  CHECK(plain.back() == gpt2_eot);
  REQUIRE(!targets.empty());
  CHECK(targets.back() == gpt2_eot);
  CHECK(bpe->decode(std::span(targets).first(targets.size() - 1)) == "Yes.\n\n");
  // Cached: a second call reuses the shards.
  auto again = prepare_sft_dataset(src, false, tmp.path() + "/data");
  CHECK(again.ok());
}

TEST_CASE("an SFT stage trains from a pretrain stage's final checkpoint on records generated from text") {
  files::temp_dir tmp("loom-sft");
  const std::string corpus = "/usr/share/common-licenses/GPL-3";
  std::string toml = "[model]\nlayers = 1\nheads = 2\nchannels = 32\nmax_seq_len = 32\nvocab = 50257\n"
                     "[data]\ntext = \"" + corpus + "\"\n"
                     "[train]\nbatch = 2\nseq_len = 32\nsteps = 6\nthreads = 2\n"
                     "[checkpoint]\nevery_steps = 3\n";
  run_options o;
  o.data_dir = tmp.path() + "/home";
  auto pre = runspec::parse_run_config(toml, "/t/run.toml", {"output.dir=" + tmp.path() + "/pretrain"});
  REQUIRE(pre.ok());
  auto p = run_training(*pre, o);
  REQUIRE(p.ok());
  auto sft = runspec::parse_run_config(toml, "/t/run.toml",
                              {"output.dir=" + tmp.path() + "/sft", "data.format=sft",
                               "model.init_from=" + tmp.path() + "/pretrain/checkpoints", "optim.lr=0", "optim.min_lr=0"});
  REQUIRE(sft.ok());
  auto s = run_training(*sft, o);
  REQUIRE(s.ok());
  CHECK(s->steps == 6);
  CHECK(s->params_sha256 == p->params_sha256);  // lr 0: exactly the pretrain stage's parameters
}
