// Training runs in-process on a small model and synthetic shards: determinism,
// stop + resume bitwise equality, refusal of mismatched resumes, fallback past a
// corrupt snapshot, init_from, the metrics log and sampling.
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/shards/writer.hpp"
#include "libs/engine/model.hpp"
#include "services/trainer/run/metrics_log.hpp"
#include "libs/runspec/run_config.hpp"
#include "services/trainer/run/sampler.hpp"
#include "services/trainer/run/snapshot_io.hpp"
#include "services/trainer/run/training_run.hpp"
#include "services/trainer/run/run_testing.hpp"

#include "libs/engine/bf16.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <sstream>

using namespace loom;
using namespace loom::trainer;
using namespace loom::trainer::testing;
namespace fs = std::filesystem;

namespace {

// The metrics lines without the timing fields, which differ run to run.
std::vector<std::string> losses(const std::string& out) {
  std::ifstream in(out + "/metrics.jsonl");
  std::vector<std::string> v;
  for (std::string line; std::getline(in, line);) v.push_back(line.substr(0, line.find(",\"tokens_per_s\"")));
  return v;
}

// A 4-step run under `tmp` (out/checkpoints, home as its data dir): its
// checkpoint key and its latest snapshot, opened.
std::pair<std::optional<std::string>, std::optional<opened_snapshot>> four_step_run(const files::temp_dir& tmp) {
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  REQUIRE(run_training(small_config(data, tmp.path() + "/out", 4), o).ok());
  auto key = checkpoint_key(o.data_dir);
  REQUIRE(key.ok());
  auto s = open_snapshot(tmp.path() + "/out/checkpoints", *key);
  REQUIRE(s.ok());
  return {std::move(*key), std::move(*s)};
}

}  // namespace

TEST_CASE("a run is deterministic and stop + resume is bitwise equal to an uninterrupted run") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";

  auto a = run_training(small_config(data, tmp.path() + "/a"), o);
  REQUIRE(a.ok());
  CHECK(a->steps == 12);
  CHECK(losses(tmp.path() + "/a").size() == 12);
  auto a2 = run_training(small_config(data, tmp.path() + "/a2"), o);
  REQUIRE(a2.ok());
  CHECK(a2->params_sha256 == a->params_sha256);
  CHECK(losses(tmp.path() + "/a2") == losses(tmp.path() + "/a"));

  // Stop after step 1 (snapshot at 1), resume, stop again at 2, resume to the end;
  // the torn tail of the log past a snapshot is dropped on resume.
  const std::string b = tmp.path() + "/b";
  std::atomic<bool> stop{true};
  run_options ob = o;
  ob.stop = &stop;
  ob.interrupt_grace = std::chrono::hours(1);  // stops land between steps, however slow a step is here
  auto b1 = run_training(small_config(data, b), ob);
  REQUIRE(b1.ok());
  CHECK(b1->stopped);
  CHECK(b1->steps == 1);
  ob.resume = true;
  auto b2 = run_training(small_config(data, b), ob);
  REQUIRE(b2.ok());
  CHECK(b2->first_step == 1);
  CHECK(b2->steps == 2);
  { std::ofstream(b + "/metrics.jsonl", std::ios::app) << "{\"step\":3,\"loss\":1.0,\"lr\""; }
  stop = false;
  auto b3 = run_training(small_config(data, b), ob);
  REQUIRE(b3.ok());
  CHECK(b3->first_step == 2);
  CHECK(b3->steps == 12);
  CHECK(b3->params_sha256 == a->params_sha256);
  CHECK(losses(b) == losses(tmp.path() + "/a"));
}

TEST_CASE("train.precision = bf16: bf16 where this CPU multiplies it natively, else fp32, and stop + resume is bitwise equal") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  const bool native = engine::probe_bf16().native;
  MESSAGE("bf16 here: " << engine::probe_bf16().why);
  auto fp32 = run_training(small_config(data, tmp.path() + "/f"), o);
  auto a = run_training(small_config(data, tmp.path() + "/a", 12, {"train.precision=\"bf16\""}), o);
  REQUIRE(a.ok());
  REQUIRE(fp32.ok());
  CHECK(fp32->precision == "fp32");
  CHECK(a->precision == (native ? "bf16" : "fp32"));  // never a failure where it cannot
  if (native) CHECK(a->params_sha256 != fp32->params_sha256);  // it did run another path
  const std::string b = tmp.path() + "/b";
  std::atomic<bool> stop{true};
  run_options ob = o;
  ob.stop = &stop;
  ob.interrupt_grace = std::chrono::hours(1);
  auto b1 = run_training(small_config(data, b, 12, {"train.precision=\"bf16\""}), ob);
  REQUIRE(b1.ok());
  CHECK(b1->steps == 1);
  stop = false;
  ob.resume = true;
  auto b2 = run_training(small_config(data, b, 12, {"train.precision=\"bf16\""}), ob);
  REQUIRE(b2.ok());
  CHECK(b2->first_step == 1);
  CHECK(b2->params_sha256 == a->params_sha256);
  CHECK(losses(b) == losses(tmp.path() + "/a"));
  // A bf16 run's snapshots are not an fp32 run's: resuming with fp32 is another configuration.
  run_options oc = o;
  oc.resume = true;
  auto other = run_training(small_config(data, b, 12), oc);
  CHECK(other.code() == errc::conflict);
}

TEST_CASE("a run learns: loss falls from ln 64 = 4.16 below 0.6 within 150 steps on the counting pattern") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  auto r = run_training(small_config(data, tmp.path() + "/out", 150, {"train.batch=8", "train.seq_len=16", "train.grad_accum=1"}), o);
  REQUIRE(r.ok());
  auto l = losses(tmp.path() + "/out");
  REQUIRE(l.size() == 150);
  CHECK(l.front().find("\"loss\":4.") != std::string::npos);  // ln 64 = 4.16
  CHECK(r->last_loss < 0.6f);
}

TEST_CASE("resume refuses another configuration, and a fresh run refuses an occupied directory") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  const std::string out = tmp.path() + "/out";
  run_options o;
  o.data_dir = tmp.path() + "/home";
  REQUIRE(run_training(small_config(data, out, 4), o).ok());
  auto again = run_training(small_config(data, out, 4), o);
  REQUIRE(!again.ok());
  CHECK(again.code() == errc::already_exists);
  CHECK(again.err().message.find("--resume") != std::string::npos);
  o.resume = true;
  auto other = run_training(small_config(data, out, 8, {"optim.lr=0.02"}), o);
  REQUIRE(!other.ok());
  CHECK(other.code() == errc::conflict);
  CHECK(other.err().message.find("step-000004") != std::string::npos);
}

TEST_CASE("resume falls back past a corrupt snapshot, names it, and still ends bitwise equal") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  auto full = run_training(small_config(data, tmp.path() + "/full"), o);
  REQUIRE(full.ok());

  const std::string out = tmp.path() + "/out";
  auto part = run_training(small_config(data, out, 12), [&] {
    run_options p = o;
    return p;
  }());
  REQUIRE(part.ok());
  // Step 12 is the last snapshot; damage it and resume from step 8 with a longer log.
  const std::string victim = out + "/checkpoints/step-000012/model.safetensors";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  fs::remove(out + "/checkpoints/LATEST");  // the newest by name is tried first, then the older ones
  std::ostringstream log;
  run_options r = o;
  r.resume = true;
  r.log = &log;
  auto resumed = run_training(small_config(data, out, 12), r);
  if (!resumed.ok()) MESSAGE(resumed.err().message);
  REQUIRE(resumed.ok());
  CHECK(resumed->first_step == 8);
  CHECK(fs::exists(out + "/checkpoints/refused/step-000012/model.safetensors"));  // kept for a human
  CHECK(log.str().find("model.safetensors") != std::string::npos);
  CHECK(log.str().find("step-000012") != std::string::npos);
  CHECK(resumed->params_sha256 == full->params_sha256);
  CHECK(losses(out) == losses(tmp.path() + "/full"));
}

TEST_CASE("init_from starts a run from another run's parameters") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  auto first = run_training(small_config(data, tmp.path() + "/first", 8), o);
  REQUIRE(first.ok());
  // lr 0: one step changes nothing, so the parameters are the ones loaded.
  auto second = run_training(small_config(data, tmp.path() + "/second", 1,
                                          {"model.init_from=" + tmp.path() + "/first/checkpoints", "optim.lr=0",
                                           "optim.min_lr=0"}),
                             o);
  REQUIRE(second.ok());
  CHECK(second->params_sha256 == first->params_sha256);
  auto fresh = run_training(small_config(data, tmp.path() + "/fresh", 1, {"optim.lr=0", "optim.min_lr=0"}), o);
  REQUIRE(fresh.ok());
  CHECK(fresh->params_sha256 != first->params_sha256);
}

TEST_CASE("open_snapshot reads the model shape and state and load_params refuses another shape") {
  files::temp_dir tmp("loom-run");
  auto [key, s] = four_step_run(tmp);
  CHECK(s->where.step == 4);
  CHECK(s->model.channels == 32);
  CHECK(s->model.padded_vocab == 128);
  CHECK(s->state.step == 4);
  CHECK(s->state.threads == 2);
  auto one = open_snapshot(tmp.path() + "/out/checkpoints/step-000004", *key);
  REQUIRE(one.ok());
  CHECK(one->state.cursor == s->state.cursor);
  CHECK(!open_snapshot(tmp.path() + "/out/checkpoints", "another key").ok());

  model::gpt2_config other = s->model;
  other.channels = 64;
  auto m = engine::gpt2::create(other, 1, 8);
  REQUIRE(m.ok());
  auto st = load_params(*s, *m);
  REQUIRE(!st.ok());
  CHECK(st.err().message.find("the model needs F32[") != std::string::npos);
}

TEST_CASE("metrics_log keeps the lines through the resumed step and drops a torn line") {
  files::temp_dir tmp("loom-run");
  const std::string path = tmp.path() + "/m.jsonl";
  {
    metrics_log m;
    REQUIRE(m.open(path, 0).ok());
    for (std::uint64_t s = 1; s <= 4; ++s) REQUIRE(m.append({s, 1.5f, 0.1f, 2.0f, 10, 1}).ok());
  }
  { std::ofstream(path, std::ios::app) << "{\"step\":5,\"lo"; }
  metrics_log m;
  REQUIRE(m.open(path, 2).ok());
  REQUIRE(m.append({3, 0.25f, 0.1f, 2.0f, 10, 1}).ok());
  auto text = files::read_file(path);
  REQUIRE(text.ok());
  CHECK(std::count(text->begin(), text->end(), '\n') == 3);
  CHECK(text->find("\"step\":3,\"loss\":0.25,") != std::string::npos);
  CHECK(to_jsonl({7, 0.1f, 0, 0, 0, 0}).find("\"loss\":0.100000001,") != std::string::npos);
}

TEST_CASE("pick: greedy and top-1 take the argmax and sampling follows the tempered distribution") {
  std::vector<std::pair<float, std::uint32_t>> scratch;
  std::vector<float> logits = {0.0f, 2.0f, 1.0f, -1.0f};
  CHECK(pick(logits, 0.0f, 0, 0.99, scratch) == 1);
  CHECK(pick(logits, 1.0f, 1, 0.99, scratch) == 1);
  // top-2 at temperature 1: p(1) = e^2/(e^2+e^1) = 0.731
  int ones = 0;
  for (int i = 0; i < 1000; ++i) {
    auto k = pick(logits, 1.0f, 2, (i + 0.5) / 1000.0, scratch);
    CHECK((k == 1 || k == 2));
    ones += k == 1;
  }
  CHECK(ones == doctest::Approx(731).epsilon(0.01));
}

TEST_CASE("generate is deterministic for a seed, stays in the vocabulary and stops at the stop token") {
  model::gpt2_config cfg;
  cfg.layers = 1; cfg.heads = 2; cfg.channels = 16; cfg.max_seq_len = 8; cfg.vocab = 50; cfg.padded_vocab = 64;
  auto m = engine::gpt2::create(cfg, 1, 8);
  REQUIRE(m.ok());
  m->init_random(3);
  std::vector<std::uint32_t> prompt = {1, 2, 3};
  sample_options so;
  so.max_tokens = 20;  // longer than the context: the window slides
  so.stop_token = 1000;
  auto a = generate(*m, prompt, so);
  auto b = generate(*m, prompt, so);
  REQUIRE((a.ok() && b.ok()));
  CHECK(*a == *b);
  CHECK(a->size() == 20);
  for (auto id : *a) CHECK(id < 50u);
  so.seed = 2;
  auto c = generate(*m, prompt, so);
  REQUIRE(c.ok());
  CHECK(*c != *a);
  so.stop_token = (*a)[0];
  so.seed = 1;
  auto d = generate(*m, prompt, so);
  REQUIRE(d.ok());
  CHECK(d->empty());
  std::vector<std::uint32_t> bad = {50};
  CHECK(!generate(*m, bad, so).ok());
}

TEST_CASE("a NaN loss rolls back to the last snapshot and skips the batch, deterministically and across resume") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  auto clean = run_training(small_config(data, tmp.path() + "/clean"), o);
  REQUIRE(clean.ok());

  std::ostringstream log;
  run_options f = o;
  f.log = &log;
  bool fired = false;
  f.fault = [&](std::uint64_t step) -> std::optional<float> {
    if (step != 7 || fired) return std::nullopt;
    fired = true;
    return std::numeric_limits<float>::quiet_NaN();
  };
  std::vector<std::string> anomalies;  // what the trainer counts for LoomLossNotFinite
  f.on_anomaly = [&](const std::string& kind) { anomalies.push_back(kind); };
  auto a = run_training(small_config(data, tmp.path() + "/a"), f);
  REQUIRE(a.ok());
  CHECK(anomalies == std::vector<std::string>{"non_finite"});
  f.on_anomaly = nullptr;
  CHECK(a->steps == 12);
  CHECK(log.str().find("step 7: loss nan") != std::string::npos);
  CHECK(log.str().find("rolled back to step 4, skipping that batch") != std::string::npos);
  CHECK(a->params_sha256 != clean->params_sha256);  // one batch fewer
  auto la = losses(tmp.path() + "/a");
  REQUIRE(la.size() == 12);
  CHECK(la[3] == losses(tmp.path() + "/clean")[3]);  // steps 1-4 unchanged
  CHECK(la[5] == losses(tmp.path() + "/clean")[5]);  // steps 5-6 replayed with the same batches
  CHECK(la[6] != losses(tmp.path() + "/clean")[6]);  // step 7 trains on the next batch

  // Stop at step 9 (after the rollback, snapshot 8 records the skip), resume: same end.
  fired = false;
  std::atomic<bool> stop{false};
  run_options g = f;
  g.stop = &stop;
  g.interrupt_grace = std::chrono::hours(1);
  g.fault = [&](std::uint64_t step) -> std::optional<float> {
    if (step == 9) stop = true;
    if (step != 7 || fired) return std::nullopt;
    fired = true;
    return std::numeric_limits<float>::infinity();
  };
  auto b1 = run_training(small_config(data, tmp.path() + "/b"), g);
  REQUIRE(b1.ok());
  CHECK(b1->stopped);
  g.fault = nullptr;
  stop = false;
  g.resume = true;
  auto b2 = run_training(small_config(data, tmp.path() + "/b"), g);
  REQUIRE(b2.ok());
  CHECK(b2->params_sha256 == a->params_sha256);
  CHECK(losses(tmp.path() + "/b") == la);
}

TEST_CASE("a loss spike beyond the z-score rolls back, and anomalies past max_rollbacks or before any snapshot fail") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  std::ostringstream log;
  o.log = &log;
  int fired = 0;
  o.fault = [&](std::uint64_t step) -> std::optional<float> {
    if (step == 10 && fired++ == 0) return 50.0f;
    return std::nullopt;
  };
  std::vector<std::string> anomalies;  // what the trainer counts for LoomLossSpike
  o.on_anomaly = [&](const std::string& kind) { anomalies.push_back(kind); };
  auto r = run_training(small_config(data, tmp.path() + "/spike", 12,
                                     {"anomaly.spike_zscore=3", "anomaly.spike_window=5", "anomaly.diverge_ratio=0"}),
                      o);
  REQUIRE(r.ok());
  CHECK(anomalies == std::vector<std::string>{"spike"});
  o.on_anomaly = nullptr;
  CHECK(log.str().find("step 10: loss 50.0000 is a spike") != std::string::npos);
  CHECK(log.str().find("rolled back to step 8") != std::string::npos);

  o.fault = [](std::uint64_t step) -> std::optional<float> {
    return step == 2 ? std::optional<float>(std::nanf("")) : std::nullopt;
  };
  auto early = run_training(small_config(data, tmp.path() + "/early"), o);
  REQUIRE(!early.ok());
  CHECK(early.err().message.find("no snapshot to roll back to") != std::string::npos);

  o.fault = [](std::uint64_t step) -> std::optional<float> {
    return step == 6 ? std::optional<float>(std::nanf("")) : std::nullopt;
  };
  auto stuck = run_training(small_config(data, tmp.path() + "/stuck", 12, {"anomaly.max_rollbacks=2"}), o);
  REQUIRE(!stuck.ok());
  CHECK(stuck.err().message.find("2 rollbacks already") != std::string::npos);
}

TEST_CASE("a loss far above the run's first is rolled back as diverged, and a learning rate far too high fails the run as diverged within a few steps") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  std::ostringstream log;
  o.log = &log;
  std::vector<std::string> anomalies;  // what the trainer counts for LoomLossDiverged
  o.on_anomaly = [&](const std::string& kind) { anomalies.push_back(kind); };
  // Injected: step 10's loss at 3x the first (vocab 64: about 4.2), once.
  int fired = 0;
  o.fault = [&](std::uint64_t step) -> std::optional<float> {
    if (step == 10 && fired++ == 0) return 12.5f;
    return std::nullopt;
  };
  auto r = run_training(small_config(data, tmp.path() + "/once"), o);
  REQUIRE(r.ok());
  CHECK(anomalies == std::vector<std::string>{"diverged"});
  CHECK(log.str().find("step 10: loss 12.5000 diverged") != std::string::npos);
  CHECK(log.str().find("rolled back to step 8") != std::string::npos);
  CHECK(r->steps == 12);
  // Off, the same loss trains on (below the spike check's window).
  anomalies.clear();
  fired = 0;
  auto off = run_training(small_config(data, tmp.path() + "/off", 12, {"anomaly.diverge_ratio=0"}), o);
  REQUIRE(off.ok());
  CHECK(anomalies.empty());
  // Values below 1.1 (a loss that never rose could count as diverged) are refused.
  CHECK(!runspec::parse_run_config("[model]\nlayers = 2\n[anomaly]\ndiverge_ratio = 1.05\n", "/t.toml", {}).ok());

  // For real: a learning rate of 8 (accepted: the bound is 10). The run stops
  // within a few steps as diverged instead of training on at a crawl.
  o.fault = nullptr;
  anomalies.clear();
  log.str("");
  auto wild = run_training(small_config(data, tmp.path() + "/wild", 40, {"optim.lr=8", "optim.warmup_steps=0"}), o);
  INFO(log.str());
  REQUIRE(!wild.ok());
  MESSAGE("lr=8: " << wild.err().message);
  CHECK(wild.err().message.find("diverged") != std::string::npos);
  REQUIRE(!anomalies.empty());
  CHECK(anomalies.front() == "diverged");
  auto steps = losses(tmp.path() + "/wild");
  CHECK(steps.size() < 12);
}

TEST_CASE("out of memory halves the micro-batch and doubles accumulation, with the same tokens per step") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  auto plain = run_training(small_config(data, tmp.path() + "/plain", 8), o);
  REQUIRE(plain.ok());

  std::ostringstream log;
  run_options f = o;
  f.log = &log;
  f.fail_alloc = [](int batch) { return batch > 1; };  // only a micro-batch of 1 fits
  auto small = run_training(small_config(data, tmp.path() + "/small", 8), f);
  REQUIRE(small.ok());
  CHECK(log.str().find("out of memory at micro-batch 2") != std::string::npos);
  CHECK(log.str().find("micro-batch 1, accumulation 4") != std::string::npos);
  // The same windows in the same steps: losses agree to float rounding.
  auto a = losses(tmp.path() + "/plain"), b = losses(tmp.path() + "/small");
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto la = nlohmann::json::parse(a[i] + "}")["loss"].get<double>();
    auto lb = nlohmann::json::parse(b[i] + "}")["loss"].get<double>();
    CHECK(std::abs(la - lb) < 1e-4);
  }

  f.fail_alloc = [](int) { return true; };
  auto none = run_training(small_config(data, tmp.path() + "/none", 8), f);
  REQUIRE(!none.ok());
  CHECK(none.code() == errc::resource_exhausted);
}

TEST_CASE("load shedding halves the micro-batch mid-run with the same tokens per step, and a resume goes on in it bitwise") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  auto plain = run_training(small_config(data, tmp.path() + "/plain"), o);
  REQUIRE(plain.ok());

  // Pressure before step 6, once: micro-batch 2 -> 1, accumulation 2 -> 4.
  auto pressured = [](int& asked) {
    return [&asked]() -> std::string { return ++asked == 6 ? "memory 95% of 8.0 GiB (injected) >= 90%" : ""; };
  };
  int asked = 0;
  std::vector<std::pair<std::string, std::string>> notices;
  run_options p = o;
  p.shed = pressured(asked);
  p.on_notice = [&](const std::string& k, const std::string& t) { notices.emplace_back(k, t); };
  auto shed = run_training(small_config(data, tmp.path() + "/shed"), p);
  REQUIRE(shed.ok());
  CHECK(shed->steps == 12);
  CHECK(asked == 12);  // asked before every step
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].first == "load_shed");
  CHECK(notices[0].second ==
        "memory 95% of 8.0 GiB (injected) >= 90%: micro-batch 2 -> 1, accumulation 2 -> 4 (32 tokens per step "
        "unchanged) from step 6");
  // Steps 1-5 are the same computation; after it the same windows in smaller
  // pieces: the loss within 1% of the unpressured run's at every step.
  auto a = losses(tmp.path() + "/plain"), b = losses(tmp.path() + "/shed");
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto la = nlohmann::json::parse(a[i] + "}")["loss"].get<double>();
    auto lb = nlohmann::json::parse(b[i] + "}")["loss"].get<double>();
    if (i < 5) CHECK(a[i] == b[i]);
    CHECK(std::abs(la - lb) <= 0.01 * la);
  }
  auto snap = open_snapshot(shed->snapshot, *existing_checkpoint_key(o.data_dir));
  REQUIRE(snap.ok());
  CHECK(snap->state.micro_batch == 1);
  CHECK(snap->state.tokens_seen == 12u * 32u);

  // The same pressure, stopped after step 9 (snapshot 9 in micro-batch 1),
  // resumed without pressure: it goes on in micro-batch 1, bitwise.
  asked = 0;
  std::atomic<bool> stop{false};
  std::ostringstream log;
  run_options c = p;
  c.on_notice = nullptr;
  c.stop = &stop;
  c.interrupt_grace = std::chrono::hours(1);
  c.on_step = [&](const step_record& r) { if (r.step == 9) stop = true; };
  auto c1 = run_training(small_config(data, tmp.path() + "/c"), c);
  REQUIRE(c1.ok());
  CHECK(c1->stopped);
  CHECK(c1->steps == 9);
  stop = false;
  c.resume = true;
  c.shed = nullptr;
  c.on_step = nullptr;
  c.log = &log;
  auto c2 = run_training(small_config(data, tmp.path() + "/c"), c);
  REQUIRE(c2.ok());
  CHECK(c2->steps == 12);
  CHECK(log.str().find("micro-batch 1, accumulation 4 as the snapshot ran (train.batch 2)") != std::string::npos);
  CHECK(c2->params_sha256 == shed->params_sha256);
  CHECK(losses(tmp.path() + "/c") == losses(tmp.path() + "/shed"));

  // Micro-batch 1 has nothing left to lower: said once, the run goes on.
  notices.clear();
  run_options one = p;
  one.shed = [] { return std::string("memory 99% of 8.0 GiB (injected) >= 90%"); };
  auto ones = run_training(small_config(data, tmp.path() + "/one", 4, {"train.batch=1", "train.grad_accum=4"}), one);
  REQUIRE(ones.ok());
  CHECK(ones->steps == 4);
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].second.find("micro-batch 1 already; nothing left to lower") != std::string::npos);
}

TEST_CASE("a run with an outer loop (diloco) starts from what start gives, syncs after every step and snapshots what finish leaves") {
  files::temp_dir tmp("loom-run-outer");
  const std::string data = make_shards(tmp.path() + "/shards");
  const std::string out = tmp.path() + "/site";
  run_options o;
  o.data_dir = tmp.path() + "/home";
  std::vector<std::uint64_t> synced;
  std::uint64_t tokens = 0;
  bool initial_there = false;
  o.outer.write_initial = true;
  o.outer.start = [&](std::span<float> p) {
    initial_there = fs::exists(out + "/checkpoints/step-000000/model.safetensors");
    std::fill(p.begin(), p.end(), 0.01f);  // "the global parameters"
    return ok_status();
  };
  o.outer.after_step = [&](std::uint64_t step, std::span<float>, std::uint64_t t) {
    synced.push_back(step);
    tokens += t;
    return ok_status();
  };
  o.outer.finish = [&](std::uint64_t step, std::span<float> p) {
    CHECK(step == 6);
    std::fill(p.begin(), p.end(), 0.5f);  // "the aggregator's global model"
    return ok_status();
  };
  auto r = run_training(small_config(data, out, 6), o);
  REQUIRE_MESSAGE(r.ok(), r.err().message);
  CHECK(initial_there);
  CHECK(synced == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6});
  CHECK(tokens == 6 * 2 * 8 * 2);  // steps x batch x seq_len x grad_accum
  // The final snapshot is what finish left, not the last inner step's parameters.
  REQUIRE(fs::exists(out + "/checkpoints/step-000006"));
  auto model = engine::gpt2::create(small_config(data, out, 6).model, 1, 8);
  REQUIRE(model.ok());
  auto snap = open_snapshot(out + "/checkpoints/step-000006", checkpoint_key(o.data_dir, out + "/checkpoints").value());
  REQUIRE(snap.ok());
  REQUIRE(load_params(*snap, *model).ok());
  CHECK(std::count(model->params().begin(), model->params().end(), 0.5f) ==
        static_cast<std::ptrdiff_t>(model->params().size()));

  // Resumed at its last step, the run has nothing to sync: no call at all.
  synced.clear();
  bool started = false;
  o.outer.start = [&](std::span<float>) {
    started = true;
    return ok_status();
  };
  o.resume = true;
  auto again = run_training(small_config(data, out, 6), o);
  REQUIRE(again.ok());
  CHECK(!started);
  CHECK(synced.empty());
}

TEST_CASE("a snapshot whose fsync fails is written again after a pause, and fails only after every attempt, naming them") {
  files::temp_dir tmp("loom-run");
  auto [key, s] = four_step_run(tmp);
  auto m = engine::gpt2::create(s->model, 1, 8);
  REQUIRE(m.ok());
  REQUIRE(load_params(*s, *m).ok());
  engine::adamw opt(m->params().size(), {}, {});
  const std::string root = tmp.path() + "/again";
  const std::string faults = tmp.path() + "/faults";
  REQUIRE(files::make_dirs(faults));
  std::ofstream(faults + "/fsync").put('1');
  ::setenv("LOOM_FAULTS_DIR", faults.c_str(), 1);

  // The fault passes during the second pause (the injected wait lifts it): published.
  std::vector<std::chrono::milliseconds> waits;
  snapshot_retry retry{8, [&](std::chrono::milliseconds d) {
                         waits.push_back(d);
                         if (waits.size() == 2) fs::remove(faults + "/fsync");
                       }};
  train_state st = s->state;
  auto dir = save_snapshot(root, *m, opt, st, *key, 3, {}, retry);
  REQUIRE_MESSAGE(dir.ok(), dir.err().to_string());
  CHECK(waits == std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(250), std::chrono::milliseconds(500)});
  CHECK(open_snapshot(*dir, *key).ok());

  // A fault that stays: every attempt, then the error naming them; nothing half-written.
  std::ofstream(faults + "/fsync").put('1');
  waits.clear();
  st.step += 4;
  auto fail = save_snapshot(root, *m, opt, st, *key, 3, {}, snapshot_retry{3, [&](auto d) { waits.push_back(d); }});
  ::unsetenv("LOOM_FAULTS_DIR");
  REQUIRE_FALSE(fail.ok());
  CHECK(waits.size() == 2);
  CHECK(fail.err().message.find("fsync") != std::string::npos);
  CHECK(fail.err().message.find("3 attempts") != std::string::npos);
  std::vector<std::string> left;
  for (auto& e : fs::directory_iterator(root)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"LATEST", dir->substr(dir->rfind('/') + 1)});
}

// An hpo segment resumed by a scheduler that lost a later segment's hand-out
// (run_options::resume_at_most): never from past the segment's end.
TEST_CASE("a segment never resumes past its end: the newest snapshot at or below it, a rung reached is scored again, none means afresh") {
  files::temp_dir tmp("loom-run");
  const std::string data = make_shards(tmp.path() + "/shards");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  o.interrupt_grace = std::chrono::hours(1);
  const std::string out = tmp.path() + "/t";
  REQUIRE(run_training(small_config(data, out), o).ok());  // snapshots at 4, 8 and 12
  // The reference: a run stopped at step 6 from the start.
  std::atomic<bool> stop{false};
  std::vector<std::uint64_t> seen;
  std::uint64_t stop_at = 0;
  auto hooked = [&](run_options r, std::uint64_t at) {
    stop = false;
    seen.clear();
    stop_at = at;
    r.stop = &stop;
    r.resume = true;
    r.resume_at_most = at;
    r.outer.after_step = [&](std::uint64_t step, std::span<float>, std::uint64_t) {
      seen.push_back(step);
      if (step == stop_at) stop = true;
      return ok_status();
    };
    return r;
  };
  auto ref = run_training(small_config(data, tmp.path() + "/ref"), hooked(o, 6));
  REQUIRE(ref.ok());
  CHECK(ref->steps == 6);

  // At a rung already reached (step 8): scored again, nothing trained, 12 set aside.
  auto at8 = run_training(small_config(data, out), hooked(o, 8));
  REQUIRE(at8.ok());
  CHECK(at8->first_step == 8);
  CHECK(at8->steps == 8);
  CHECK(seen == std::vector<std::uint64_t>{8});
  CHECK(fs::exists(out + "/checkpoints/refused/step-000012"));
  CHECK(!fs::exists(out + "/checkpoints/step-000012"));
  // Below the newest: from step 4 to 6, the same parameters as the reference.
  auto at6 = run_training(small_config(data, out), hooked(o, 6));
  REQUIRE(at6.ok());
  CHECK(at6->first_step == 4);
  CHECK(at6->steps == 6);
  CHECK(seen == std::vector<std::uint64_t>{5, 6});
  CHECK(at6->params_sha256 == ref->params_sha256);
  CHECK(fs::exists(out + "/checkpoints/refused/step-000008"));
  // Below every snapshot: afresh from step 0, to the same step-6 parameters again.
  fs::remove_all(out + "/checkpoints/step-000006");
  auto at3 = run_training(small_config(data, out), hooked(o, 3));
  REQUIRE(at3.ok());
  CHECK(at3->first_step == 0);
  CHECK(at3->steps == 3);
  CHECK(!fs::exists(out + "/checkpoints/step-000004"));
}
