// Each suggestion on evidence built by hand: it comes when its measurement
// says so, with the --set that applies it, and not otherwise.
#include "libs/diagnose/suggest.hpp"

#include <doctest/doctest.h>

using namespace loom::diagnose;

namespace {

// One stage on an 8-core, 16 GiB trainer: threads 8, micro-batch 4, a loss falling then flat.
evidence base() {
  evidence e;
  e.job = "job-1";
  e.template_name = "pretrain-tiny";
  e.state = "succeeded";
  stage_fact s;
  s.name = "pretrain";
  s.state = "succeeded";
  s.node = "trainer@h";
  s.memory_bytes = 200ull << 20;
  s.config = {true, "lm", "fp32", 8, 4, 1, 64, 60, 5, 2e-3, 3, "", "", "", 0, ""};
  for (int i = 1; i <= 60; ++i) s.steps.push_back({std::uint64_t(i), i < 30 ? 6.0 - 0.1 * i : 3.1, 2e-3, 1, 1000, 10});
  e.stages.push_back(s);
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
  s.sites = {{"north", "trainer@h", 60, 7, 3.1, 6.0, 7, 0, 0, 0}};
  auto x = suggest(e, {});
  REQUIRE(!x.empty());
  CHECK(x.front().id == "diloco_h");
  CHECK(x.front().sets == std::vector<std::string>{"diloco.inner_steps=16", "diloco.codec=int4"});
}
