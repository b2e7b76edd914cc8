// Cross-process: `loom suggest` (issue 31 item 2) on real jobs through `loom
// up` (one trainer process, which has every core of the host): a job that
// splits its step into micro-batches of 1 with memory to spare, and — on a
// CPU with bf16 matrix units only — one in fp32. The matching suggestion must
// come first; the job submitted again with its --set must move the metric it
// names (tokens/s), which the test measures. (Too few threads and a learning
// rate too high are covered by libs/diagnose/suggest.test.cpp only: on this
// small model a second thread did not raise tokens/s, and lr 0.05 did not
// turn the loss back up — not yet cases the test can hold the command to.)
#include "libs/files/files.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const char* tmpl = R"([job]
name = "suggest-tiny"
stages = ["pretrain"]
[model]
layers = 2
heads = 4
channels = 128
max_seq_len = 64
vocab = 256
padded_vocab = 256
[data]
tokenizer = "bytes"
[train]
precision = "fp32"
batch = 8
seq_len = 64
steps = 60
seed = 7
threads = 1
[optim]
lr = 3e-3
min_lr = 1e-4
warmup_steps = 5
weight_decay = 0.1
grad_clip = 1.0
[checkpoint]
every_steps = 0
keep = 1
)";

struct run_figures {
  double tokens_per_s = 0;  // median over the steps after the first
  double final_loss = 0;    // mean of the last 10 steps
};

struct bench {
  std::string home, templates;

  std::vector<std::string> base;  // sets every run takes first

  std::string submit(const std::vector<std::string>& sets) {
    std::vector<std::string> args = {"job", "submit", "--templates", templates, "--template", "suggest-tiny",
                                     "--set", "text=/usr/share/common-licenses/GPL-3"};
    for (const auto& s : base) args.insert(args.end(), {"--set", s});
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    auto j = loom_json(home, args);
    REQUIRE_MESSAGE(j.contains("id"), json(sets).dump() << ": " << j.dump());
    return j["id"].get<std::string>();
  }
  run_figures run(const std::vector<std::string>& sets, std::string* id_out = nullptr) {
    const auto id = submit(sets);
    auto done = wait_done(home, id, 240s);
    REQUIRE_MESSAGE(done.value("state", "") == "succeeded", done.dump());
    if (id_out) *id_out = id;
    std::vector<double> speeds, losses;
    std::ifstream in(done["out_dir"].get<std::string>() + "/pretrain/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto p = json::parse(line, nullptr, false);
      if (!p.is_object()) continue;
      if (p.value("step", 0) > 1) speeds.push_back(p.value("tokens_per_s", 0.0));
      losses.push_back(p.value("loss", 0.0));
    }
    run_figures f;
    std::sort(speeds.begin(), speeds.end());
    if (!speeds.empty()) f.tokens_per_s = speeds[speeds.size() / 2];
    const std::size_t n = std::min<std::size_t>(10, losses.size());
    for (std::size_t i = losses.size() - n; i < losses.size(); ++i) f.final_loss += losses[i] / double(n);
    return f;
  }
  json suggest(const std::string& id) { return loom_json(home, {"suggest", id}); }
};

std::vector<std::string> sets_of(const json& s) {
  std::vector<std::string> out;
  for (const auto& x : s["set"]) out.push_back(x.get<std::string>());
  return out;
}

bool cpu_has_bf16() {
  auto info = files::read_file("/proc/cpuinfo");
  return info && (info->find(" avx512_bf16") != std::string::npos || info->find(" amx_bf16") != std::string::npos);
}

}  // namespace

TEST_CASE("loom suggest puts the matching suggestion first, and its --set improves the metric it names") {
  temp_dir home{"loom-suggest"}, tdir{"loom-suggest-templates"};
  up_guard guard{home.path()};
  REQUIRE(files::write_atomic(tdir.path() + "/suggest-tiny.toml", tmpl).ok());
  auto up = run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 90s);
  REQUIRE_MESSAGE(up.code == 0, up.out << up.err);
  bench b{home.path(), tdir.path(), {}};
  unsigned cores = 0;
  for (const auto& n : loom_json(home.path(), {"status"}).value("nodes", json::array()))
    if (n.value("service", "") == "trainer") cores = n.value("cpu_cores", 0u);
  REQUIRE(cores > 0);
  const std::string all = "train.threads=" + std::to_string(cores);
  // On a CPU with bf16 units an fp32 run's first suggestion is bf16 (case 4): the others run in auto.
  if (cpu_has_bf16()) b.base = {"train.precision=auto"};

  auto check = [&](const std::string& what, const std::string& id, const std::string& want) {
    auto s = b.suggest(id);
    INFO(what << ": " << s.dump(1));
    REQUIRE(!s["suggestions"].empty());
    CHECK(s["suggestions"][0]["id"] == want);
    return s["suggestions"][0];
  };

  // 1. Micro-batches of 1 with memory to spare: the same tokens per step in larger pieces.
  {
    std::string id;
    const auto before = b.run({all, "train.batch=1", "train.grad_accum=8"}, &id);
    const auto s = check("micro-batch 1 x 8", id, "micro_batch");
    CHECK(sets_of(s) == std::vector<std::string>{"train.batch=8", "train.grad_accum=1"});
    auto next = sets_of(s);
    next.insert(next.begin(), all);
    const auto after = b.run(next);
    MESSAGE("micro-batch 1 x 8 -> 8 x 1: " << before.tokens_per_s << " -> " << after.tokens_per_s << " tokens/s");
    CHECK(after.tokens_per_s > 1.15 * before.tokens_per_s);
  }

  // 2. fp32 where the CPU has bf16 matrix units.
  b.base.clear();
  if (!cpu_has_bf16()) {
    MESSAGE("LOOM_TEST_SKIPPED: this CPU has no bf16 matrix units (avx512_bf16 / amx_bf16): the fp32 case runs on one that has");
  } else {
    std::string id;
    const auto before = b.run({all}, &id);
    const auto s = check("fp32 on bf16", id, "precision");
    auto next = sets_of(s);
    next.insert(next.begin(), all);
    const auto after = b.run(next);
    MESSAGE("fp32 -> auto: " << before.tokens_per_s << " -> " << after.tokens_per_s << " tokens/s");
    CHECK(after.tokens_per_s > 1.05 * before.tokens_per_s);  // 1.17x measured: this model's matmuls are small
  }
}
