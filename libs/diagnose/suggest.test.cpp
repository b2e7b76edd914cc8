// Each suggestion on evidence built by hand: it comes when its measurement
// says so, with the --set that applies it, and not otherwise.
#include "libs/diagnose/suggest.hpp"
#include "libs/diagnose/test_evidence.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace loom::diagnose;

namespace {

// One stage on an 8-core, 16 GiB trainer: threads 8, micro-batch 4, a loss falling then flat.
evidence base() {
  evidence e = testing::one_stage_job("trainer@h", 8, 60);
  auto& s = e.stages[0];
  s.memory_bytes = 200ull << 20;
  for (int i = 1; i <= 60; ++i) s.steps.push_back({std::uint64_t(i), i < 30 ? 6.0 - 0.1 * i : 3.1, 2e-3, 1, 1000, 10});
  e.nodes.push_back({"trainer@h", "trainer", "local", "alive", 8, 16ull << 30, 1});
  return e;
}

std::string first(const evidence& e, cpu_facts cpu = {}) {
  auto s = suggest(e, cpu);
  return s.empty() ? "none" : s.front().id;
}

}  // namespace

TEST_CASE("a run that used its machine and converged gets no suggestion") { CHECK(first(base()) == "none"); }

TEST_CASE("too few threads: the cores the trainer's host gives each trainer process") {
  auto e = base();
  e.stages[0].config.threads = 2;
  auto s = suggest(e, {});
  REQUIRE(!s.empty());
  CHECK(s.front().id == "threads");
  CHECK(s.front().sets == std::vector<std::string>{"train.threads=8"});
  CHECK(s.front().command == "loom job submit --template pretrain-tiny --set train.threads=8");
  e.nodes.push_back({"trainer-2@h", "trainer", "local", "alive", 8, 16ull << 30, 1});  // two processes share h
  CHECK(suggest(e, {}).front().sets == std::vector<std::string>{"train.threads=4"});
  e.stages[0].config.threads = 4;
  CHECK(first(e) == "none");
}

TEST_CASE("a small micro-batch with memory to spare: larger pieces, the same tokens per step") {
  auto e = base();
  e.stages[0].config.batch = 1;
  e.stages[0].config.grad_accum = 8;
  auto s = suggest(e, {});
  REQUIRE(!s.empty());
  CHECK(s.front().id == "micro_batch");
  CHECK(s.front().sets == std::vector<std::string>{"train.batch=8", "train.grad_accum=1"});
  e.stages[0].memory_bytes = 3ull << 30;  // 3 GiB a piece: twice that is most of half the node
  CHECK(suggest(e, {}).front().sets == std::vector<std::string>{"train.batch=2", "train.grad_accum=4"});
}

TEST_CASE("fp32 on a CPU with bf16 matrix units comes first, and only there") {
  auto e = base();
  e.stages[0].config.threads = 2;
  CHECK(first(e, {true, true}) == "precision");
  CHECK(first(e, {true, false}) == "threads");
}

TEST_CASE("the learning rate from the curve's shape: lower when the loss went back up, higher when it barely moved") {
  auto up = base();
  for (std::size_t i = 40; i < 60; ++i) up.stages[0].steps[i].loss = 4.5;
  auto s = suggest(up, {});
  REQUIRE(!s.empty());
  CHECK(s.front().id == "lr_lower");
  CHECK(s.front().sets == std::vector<std::string>{"optim.lr=0.000667"});
  auto flat = base();
  for (auto& p : flat.stages[0].steps) p.loss = 5.5;
  auto f = suggest(flat, {});
  REQUIRE(!f.empty());
  CHECK(f.front().id == "lr_higher");
  CHECK(f.front().sets == std::vector<std::string>{"optim.lr=0.006"});
}

TEST_CASE("a loss that overshoots its start in the first quarter asks for a lower rate, batch noise alone does not") {
  // Measured (tests/suggest.test.cpp's model at lr 3e-3): 5.42 at step 1, 7.24 at step 7, then flat at 3.1.
  auto spike = base();
  spike.stages[0].steps[6].loss = 1.3 * spike.stages[0].steps[0].loss;
  auto s = suggest(spike, {});
  REQUIRE(!s.empty());
  CHECK(s.front().id == "lr_lower");
  CHECK(s.front().evidence.front().find("overshot") != std::string::npos);
  // Byte-level batches: ±0.2 around a falling curve, its lowest single batch early. Not a rate too high.
  auto noisy = base();
  for (std::size_t i = 0; i < 60; ++i) noisy.stages[0].steps[i].loss += (i % 2 ? 0.2 : -0.2);
  noisy.stages[0].steps[31].loss = 2.5;
  for (const auto& x : suggest(noisy, {})) {
    INFO(x.evidence.front());
    CHECK(x.id != "lr_lower");
  }
}

TEST_CASE("a loss still falling at the end suggests more steps") {
  auto e = base();
  for (int i = 0; i < 60; ++i) e.stages[0].steps[i].loss = 6.0 - 0.05 * i;
  auto s = suggest(e, {});
  REQUIRE(!s.empty());
  CHECK(s.front().id == "more_steps");
  CHECK(s.front().sets == std::vector<std::string>{"train.steps=120"});
}

TEST_CASE("a cross-site stage whose site waits on the sync: a larger H and a smaller codec") {
  auto e = base();
  auto& s = e.stages[0];
  s.config.inner_steps = 8;
  s.config.codec = "int8";
  s.started_unix_ns = 1'000'000'000'000;
  s.finished_unix_ns = s.started_unix_ns + 20'000'000'000;
  s.sites = {{"north", "trainer@h", 60, 7, 3.1, 6.0, 7, 0, 0, 0, {}}};
  auto x = suggest(e, {});
  REQUIRE(!x.empty());
  CHECK(x.front().id == "diloco_h");
  CHECK(x.front().sets == std::vector<std::string>{"diloco.inner_steps=16", "diloco.codec=int4"});
}

TEST_CASE("a model sized against its data: narrower when the data is tiny, wider when it has stopped learning on plenty") {
  // base() has no model shape: 2 layers, 4 heads, 256 wide, the GPT-2 vocabulary.
  auto e = base();
  auto& c = e.stages[0].config;
  c.layers = 2, c.heads = 4, c.channels = 256, c.dataset = "web";
  c.params = 2 * (12ull * 256 * 256 + 13 * 256) + (50304ull + 64) * 256 + 2 * 256;  // 14.5M
  e.datasets.push_back({"web", false, 1000, 2'000'000, 0, false, {}, 0, "", ""});   // 0.14 tokens per parameter
  auto s = suggest(e, {});
  REQUIRE(!s.empty());
  const auto small = std::find_if(s.begin(), s.end(), [](const suggestion& x) { return x.id == "model_smaller"; });
  REQUIRE(small != s.end());
  CHECK(small->sets == std::vector<std::string>{"model.channels=32"});  // three halvings: the most it narrows
  CHECK(small->evidence.front().find("0.14 tokens per parameter") != std::string::npos);
  // Plenty of data (100 per parameter), 29 per parameter seen, the loss flat at its end: wider.
  e.datasets[0].tokens = 1'450'000'000;
  c.steps = 100, c.batch = 4096, c.grad_accum = 1, c.seq_len = 1024;  // 419M tokens seen
  s = suggest(e, {});
  REQUIRE(!s.empty());
  CHECK(s.front().id == "model_larger");
  CHECK(s.front().sets == std::vector<std::string>{"model.channels=512"});
  // The same, the loss still falling: more steps first, not a wider model.
  for (int i = 0; i < 60; ++i) e.stages[0].steps[i].loss = 6.0 - 0.05 * i;
  for (const auto& x : suggest(e, {})) CHECK(x.id != "model_larger");
  // Between the two (20 tokens per parameter): nothing about the size.
  e.datasets[0].tokens = 290'000'000;
  for (const auto& x : suggest(e, {})) CHECK((x.id != "model_larger" && x.id != "model_smaller"));
}

TEST_CASE("a dataset whose import rejected a fifth of its documents: the rule that rejected most, and what to do") {
  auto e = base();
  e.stages[0].config.dataset = "forum";
  e.datasets.push_back({"forum", false, 800, 400'000'000, 200, false,
                        {{"gopher_min_words", 150}, {"licence_denied", 50}}, 200,
                        "gopher_min_words at /data/forum/a.txt: 12 words (at least 50)", "/data/forum"});
  auto s = suggest(e, {});
  const auto r = std::find_if(s.begin(), s.end(), [](const suggestion& x) { return x.id == "data_rejects"; });
  REQUIRE(r != s.end());
  CHECK(r->title.find("20% of the documents") != std::string::npos);
  CHECK(r->title.find("gopher_min_words") != std::string::npos);
  CHECK(r->command == "loom data rejects forum");
  CHECK(r->sets.empty());
  CHECK(r->evidence[1] == "by rule (of the first 200): gopher_min_words 150, licence_denied 50");
  CHECK(r->evidence.back().find("loom data import /data/forum --dataset forum --profile minimal") != std::string::npos);
  // 2% rejected: nothing to say. A text file's "rejects" are never counted.
  e.datasets[0].rejects = 16;
  for (const auto& x : suggest(e, {})) CHECK(x.id != "data_rejects");
}
