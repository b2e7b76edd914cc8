#include "services/trainer/run/sft_data.hpp"

#include "libs/files/temp_dir.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "services/trainer/run/run_config.hpp"
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
  auto pre = parse_run_config(toml, "/t/run.toml", {"output.dir=" + tmp.path() + "/pretrain"});
  REQUIRE(pre.ok());
  auto p = run_training(*pre, o);
  REQUIRE(p.ok());
  auto sft = parse_run_config(toml, "/t/run.toml",
                              {"output.dir=" + tmp.path() + "/sft", "data.format=sft",
                               "model.init_from=" + tmp.path() + "/pretrain/checkpoints", "optim.lr=0", "optim.min_lr=0"});
  REQUIRE(sft.ok());
  auto s = run_training(*sft, o);
  REQUIRE(s.ok());
  CHECK(s->steps == 6);
  CHECK(s->params_sha256 == p->params_sha256);  // lr 0: exactly the pretrain stage's parameters
}
