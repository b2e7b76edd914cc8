// Cross-process: `loom suggest` (issue 31 item 2) on real jobs through `loom
// up` (one trainer process, which has every core of the host): a job run on
// one thread, one with a learning rate so high its loss overshoots where it
// started, one that splits its step into micro-batches of 1 with memory to
// spare, on a CPU with bf16 matrix units only one in fp32, and one on a
// dataset that lost a third of its files at import and is far too small for
// its model (a narrower model first; the rejects listed with their rule). The
// matching suggestion must come first; the job submitted again with its --set
// must move the metric it names (tokens/s or the final loss), which the test
// measures. The model is a 4-layer, 256-wide byte-level GPT, ~5 s jobs; the
// threads case widens it to 384, where a step splits over two cores (which
// the services share) for a steady 1.6x, not 1.1-1.5x.
#include "libs/files/files.hpp"
#include "tests/support/byte_template.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Measured on a 2-core EPYC: 1 -> 2 threads 10.4k -> 14.4k tokens/s; lr 3e-3
// peaks at 7.24 (from 5.42) at step 7 and sits at 3.1, lr 1e-3 ends at 2.63.
const byte_gpt model{.name = "suggest-tiny", .layers = 4, .channels = 256, .seq_len = 64, .steps = 60,
                     .lr = "1e-3", .min_lr = "1e-4", .every_steps = 0, .keep = 1};

struct run_figures {
  // The 90th percentile over the steps after the first: contention (this host's
  // other processes, a noisy neighbour of the VM) only ever slows a step down,
  // so the fast steps are the configuration's own speed; a median moved ±20%
  // between runs of the same job on a 2-core host.
  double tokens_per_s = 0;
  double final_loss = 0;    // mean of the last 10 steps
};

struct bench {
  std::string home, templates;

  std::vector<std::string> base;  // sets every run takes first
  std::string tmpl = "suggest-tiny", data = "text=/usr/share/common-licenses/GPL-3";

  std::string submit(const std::vector<std::string>& sets) {
    std::vector<std::string> args = {"job", "submit", "--templates", templates, "--template", tmpl, "--set", data};
    for (const auto& s : base) args.insert(args.end(), {"--set", s});
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    auto j = loom_json(home, args);
    REQUIRE_MESSAGE(j.contains("id"), json(sets).dump() << ": " << j.dump());
    return j["id"].get<std::string>();
  }
  run_figures run(const std::vector<std::string>& sets, std::string* id_out = nullptr) {
    const auto id = submit(sets);
    // Every 2 s: each look is a `loom` process, and on a 2-core host it would take from the job it measures.
    auto done = wait_done(home, id, 240s, 2000ms);
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
    if (!speeds.empty()) f.tokens_per_s = speeds[speeds.size() * 9 / 10];
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
  REQUIRE(files::write_atomic(tdir.path() + "/suggest-tiny.toml", byte_template(model)).ok());
  REQUIRE(files::write_atomic(tdir.path() + "/suggest-gpt2.toml",
                              byte_template({.name = "suggest-gpt2", .every_steps = 0, .keep = 1, .gpt2 = true}))
              .ok());
  auto up = run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 90s);
  REQUIRE_MESSAGE(up.code == 0, up.out << up.err);
  bench b;
  b.home = home.path(), b.templates = tdir.path();
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

  // 1. One thread on a host with more cores.
  if (cores < 2) {
    MESSAGE("LOOM_TEST_SKIPPED: the trainer has one core: the threads case needs two or more");
  } else {
    std::string id;
    // 384 wide: on 2 cores, one of them shared with the services and this test, a 256-wide step
    // gained 1.14-1.46x from its second thread, a 384-wide one 1.65x.
    const auto before = b.run({"model.channels=384", "train.threads=1"}, &id);
    const auto s = check("one thread", id, "threads");
    CHECK(sets_of(s) == std::vector<std::string>{all});
    auto next = sets_of(s);
    next.insert(next.begin(), "model.channels=384");
    const auto after = b.run(next);
    MESSAGE("threads 1 -> " << cores << ": " << before.tokens_per_s << " -> " << after.tokens_per_s << " tokens/s");
    // Faster, not twice: on a 64-wide model the step is mostly the 50,304-way softmax, which a
    // narrower model keeps (1.2x measured).
    CHECK(after.tokens_per_s > before.tokens_per_s);
  }

  // 2. A learning rate too high: the loss overshoots its start, then sits above where a lower rate gets.
  {
    std::string id;
    const auto before = b.run({all, "optim.lr=3e-3"}, &id);
    const auto s = check("lr 3e-3", id, "lr_lower");
    CHECK(sets_of(s) == std::vector<std::string>{"optim.lr=0.001"});
    auto next = sets_of(s);
    next.insert(next.begin(), all);
    const auto after = b.run(next);
    MESSAGE("lr 3e-3 -> 1e-3: final loss " << before.final_loss << " -> " << after.final_loss);
    CHECK(after.final_loss < before.final_loss - 0.1);
  }

  // 3. Micro-batches of 1 with memory to spare: the same tokens per step in larger pieces.
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

  // 4. fp32 where the CPU has bf16 matrix units.
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

  // 5. A dataset whose import rejected a third of its files, far too small for the model on it: the
  //    rejects with their rule and what to do, and a narrower model first, whose rerun is faster.
  {
    const std::string dir = home.path() + "/imports/forum";
    std::filesystem::create_directories(dir);
    for (const char* f : {"GPL-3", "GPL-2", "Apache-2.0", "LGPL-2.1"})
      REQUIRE(files::write_atomic(dir + "/" + f + ".txt", *files::read_file(std::string("/usr/share/common-licenses/") + f)).ok());
    REQUIRE(files::write_atomic(dir + "/note-1.txt", "see you at noon\n").ok());
    REQUIRE(files::write_atomic(dir + "/note-2.txt", "the build is green again\n").ok());
    auto imp = run_loom(home.path(), {"data", "import", dir, "--dataset", "forum"}, 120s);
    REQUIRE_MESSAGE(imp.code == 0, imp.out << imp.err);
    b.tmpl = "suggest-gpt2";
    b.data = "dataset=forum";
    if (cpu_has_bf16()) b.base = {"train.precision=auto"};
    std::string id;
    const auto before = b.run({all}, &id);
    const auto s = check("forum: 2 of 6 files rejected, ~20k tokens for 3.3M parameters", id, "model_smaller");
    CHECK(sets_of(s) == std::vector<std::string>{"model.channels=32"});
    const auto all_found = b.suggest(id)["suggestions"];
    const auto rejects = std::find_if(all_found.begin(), all_found.end(), [](const json& x) { return x["id"] == "data_rejects"; });
    REQUIRE_MESSAGE(rejects != all_found.end(), all_found.dump(1));
    CHECK((*rejects)["title"].get<std::string>().starts_with("33% of the documents were rejected"));
    CHECK((*rejects)["evidence"][0] == "dataset forum: 4 documents kept, 2 rejected");
    CHECK((*rejects)["command"] == "loom data rejects forum");
    auto next = sets_of(s);
    next.insert(next.begin(), all);
    const auto after = b.run(next);
    MESSAGE("channels 64 -> 32 on a 20k-token dataset: " << before.tokens_per_s << " -> " << after.tokens_per_s << " tokens/s");
    // Faster, not twice: on a 64-wide model the step is mostly the 50,304-way softmax, which a
    // narrower model keeps (1.2x measured).
    CHECK(after.tokens_per_s > before.tokens_per_s);
  }
}
