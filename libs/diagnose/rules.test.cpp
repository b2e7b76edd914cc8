// Each rule on evidence in the words the services really use (the texts are
// those of the trainer, scheduler and ckpt code): the rule's own fault comes
// out on top with its repair steps; a healthy job has no finding.
#include "libs/diagnose/render.hpp"
#include "libs/diagnose/rules.hpp"
#include "libs/diagnose/test_evidence.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <set>

using namespace loom::diagnose;

namespace {

// A pretrain-tiny job whose loss fell from 10.9 to 6 over 30 steps at 1000 tokens/s.
evidence healthy() {
  evidence e = testing::one_stage_job("trainer-1", 2, 30);
  for (int i = 1; i <= 30; ++i) e.stages[0].steps.push_back({std::uint64_t(i), 10.9 - 0.16 * i, 2e-3, 1.0, 1000, 256});
  e.nodes.push_back({"trainer-1", "trainer", "default", "alive", 2, 8ull << 30, 1});
  e.disks.push_back({"/data/jobs/job-1", 50ull << 30, 100ull << 30});
  return e;
}

void fail_with(evidence& e, const std::string& text) {
  e.state = "failed";
  e.stages[0].state = "failed";
  e.message = "stage pretrain: " + text;
  e.events.push_back({1, "pretrain", "stage_failed", e.message});
}

std::string top(const evidence& e) {
  auto f = diagnose(e);
  return f.empty() ? "none" : f.front().rule;
}

}  // namespace

TEST_CASE("a healthy job has no finding, and the text says no problem found") {
  const auto e = healthy();
  CHECK(diagnose(e).empty());
  CHECK(render_text(e, {}).find("no problem found") != std::string::npos);
  CHECK(render_json(e, {})["problem_found"] == false);
}

TEST_CASE("every rule has an id, a title, its signals and repair steps, and ids are unique") {
  std::set<std::string> ids;
  for (const auto& r : rules()) {
    CHECK(!r.id.empty());
    CHECK(!r.title.empty());
    CHECK(!r.signals.empty());
    CHECK(!r.repair.empty());
    CHECK(ids.insert(r.id).second);
  }
  CHECK(rules().size() >= 13);
}

TEST_CASE("divergence: a stage failed on a diverged loss is named first with a ten-fold lower learning rate") {
  auto e = healthy();
  fail_with(e, "step 3: loss 24.1000 diverged: 2.2x the run's start 10.9000 (anomaly.diverge_ratio 2.0); 3 rollbacks "
               "already (anomaly.max_rollbacks)");
  auto f = diagnose(e);
  REQUIRE(!f.empty());
  CHECK(f.front().rule == "diverged");
  CHECK(f.front().stage == "pretrain");
  CHECK(f.front().repair.front().find("--set optim.lr=0.0002") != std::string::npos);
}

TEST_CASE("divergence: a non-finite loss in a rollback names it, a curve far above its start alone does too") {
  auto e = healthy();
  e.state = "running";
  e.events.push_back({1, "pretrain", "rollback", "step 9: loss nan, gradient norm nan: not finite; rolled back to step 5"});
  CHECK(top(e) == "diverged");
  auto c = healthy();
  c.stages[0].steps.back().loss = 3021;
  CHECK(top(c) == "diverged");
}

TEST_CASE("plateau: a loss flat over 30 steps is named with a higher learning rate, a falling one is not") {
  auto e = healthy();
  for (auto& p : e.stages[0].steps) p.loss = 10.95 - 0.0001 * double(p.step), p.lr = 1e-7;
  e.stages[0].config.lr = 1e-7;
  auto f = diagnose(e);
  REQUIRE(!f.empty());
  CHECK(f.front().rule == "plateau");
  CHECK(f.front().repair.front().find("--set optim.lr=0.0006") != std::string::npos);
  CHECK(top(healthy()) == "none");
}

TEST_CASE("out of memory: back-off exhausted at micro-batch 1 is named with a halved batch or shorter windows") {
  auto e = healthy();
  e.state = "running";
  e.events.push_back({1, "pretrain", "load_shed", "memory 93% of the limit: micro-batch 1 already; nothing left to lower"});
  e.events.push_back({2, "pretrain", "paused", "paused: memory pressure on trainer-1"});
  auto f = diagnose(e);
  REQUIRE(!f.empty());
  CHECK(f.front().rule == "out_of_memory");
  CHECK(f.front().repair.front().find("train.batch=2") != std::string::npos);
  auto g = healthy();
  fail_with(g, "micro-batch 4: std::bad_alloc");
  CHECK(top(g) == "out_of_memory");
}

TEST_CASE("data fetch: a failed pull from ingest is named with the dataset in its repair steps") {
  auto e = healthy();
  fail_with(e, "data.dataset corpus: cannot fetch it from the ingest service at tcp://127.0.0.1:7001: unavailable: "
               "no reply in 2000 ms");
  auto f = diagnose(e);
  REQUIRE(!f.empty());
  CHECK(f.front().rule == "data_fetch");
  CHECK(f.front().repair[2] == "are its shards whole: loom data verify corpus");
}

TEST_CASE("dead or flapping node: lost twice is flapping, a trainer that stopped answering fails the stage") {
  auto e = healthy();
  e.state = "running";
  e.stages[0].state = "running";
  e.events.push_back({1, "pretrain", "requeued", "trainer trainer-1 lost; resumes from its latest checkpoint"});
  e.events.push_back({2, "pretrain", "requeued", "trainer trainer-1 lost; resumes from its latest checkpoint"});
  auto f = diagnose(e);
  REQUIRE(!f.empty());
  CHECK(f.front().rule == "node_lost");
  CHECK(f.front().confidence >= 0.85);
  CHECK(f.front().repair[2].find("loom node drain trainer-1") != std::string::npos);
  auto g = healthy();
  fail_with(g, "its trainer stopped answering 3 times while running it (last: trainer-1); not placing it again");
  CHECK(top(g) == "node_lost");
  auto restarts = healthy();  // killed and restarted by the watcher, twice: the stage resumed, the node flaps
  restarts.state = "running";
  restarts.stages[0].state = "running";
  for (int k = 0; k < 2; ++k)
    restarts.events.push_back({std::uint64_t(k), "pretrain", "resumed",
                               "trainer trainer@vm restarted; resuming from the latest checkpoint (attempt 2)"});
  auto r = diagnose(restarts);
  REQUIRE(!r.empty());
  CHECK(r.front().rule == "node_lost");
  CHECK(r.front().confidence >= 0.85);
  CHECK(r.front().repair[2].find("loom node drain trainer@vm") != std::string::npos);
  auto dead = healthy();
  dead.state = "running";
  dead.stages[0].state = "running";
  dead.nodes[0].state = "dead";
  CHECK(top(dead) == "node_lost");
}

TEST_CASE("a loss a trainer back from a cut link took back is no node fault, one whose loop ran late is") {
  auto cut = healthy();
  cut.events.push_back({1, "pretrain", "requeued", "trainer trainer@north lost; resumes from its latest checkpoint"});
  cut.events.push_back({2, "pretrain", "cut_off",
                        "trainer trainer@north is back, the same process: the scheduler had not answered it for 4.2 s "
                        "while its heartbeats ran on time (a cut link); its loss is not counted against the stage"});
  CHECK(top(cut) != "node_lost");
  auto stopped = healthy();
  stopped.state = "running";
  stopped.stages[0].state = "running";
  stopped.events.push_back({1, "pretrain", "requeued", "trainer trainer-1 lost; resumes from its latest checkpoint"});
  stopped.events.push_back({2, "pretrain", "stalled",
                            "trainer trainer-1 is back, the same process, but its own heartbeats ran 9.0 s behind "
                            "(stopped or starved, not a cut link): its loss counts against the stage"});
  auto f = diagnose(stopped);
  REQUIRE(!f.empty());
  CHECK(f.front().rule == "node_lost");
  bool said = false;
  for (const auto& ev : f.front().evidence) said = said || ev.find("ran 9.0 s behind") != std::string::npos;
  CHECK(said);
}

TEST_CASE("corrupt checkpoint: no snapshot verifies fails the stage, a fallback alone is named too") {
  auto e = healthy();
  fail_with(e, "no snapshot under /d/jobs/job-1/pretrain/checkpoints verifies:\n  REFUSED snapshot step_00000010; "
               "falling back to the previous one");
  CHECK(top(e) == "corrupt_checkpoint");
  auto g = healthy();
  g.events.push_back({1, "pretrain", "snapshot_fallback", "resume: REFUSED snapshot step_00000010; falling back"});
  CHECK(top(g) == "corrupt_checkpoint");
}

TEST_CASE("disk full: ENOSPC in the failure, or almost no room where the job writes") {
  auto e = healthy();
  fail_with(e, "write /d/jobs/job-1/pretrain/checkpoints/.tmp/model.safetensors: No space left on device");
  CHECK(top(e) == "disk_full");
  auto g = healthy();
  g.disks[0].free_bytes = 10 << 20;
  CHECK(top(g) == "disk_full");
  g.disks[0].free_bytes = 300ull << 20;  // a small disk, not a full one
  g.disks[0].total_bytes = 400ull << 20;
  CHECK(top(g) == "none");
  g.disks[0].free_bytes = 10 << 20;
  CHECK(top(g) == "disk_full");
}

TEST_CASE("permission: a file outside the allowed roots is named with the directory to allow") {
  auto e = healthy();
  fail_with(e, "data.text: /etc/passwd is outside the allowed roots /d/imports, /d/jobs");
  auto f = diagnose(e);
  REQUIRE(!f.empty());
  CHECK(f.front().rule == "permission");
  CHECK(f.front().repair[1].find("loom up --import-root /etc") != std::string::npos);
}

TEST_CASE("never placed: each waiting reason gets its cause, a busy cluster is low confidence") {
  auto q = [](const std::string& waiting) {
    auto e = healthy();
    e.state = "queued";
    e.stages[0].state = "queued";
    e.stages[0].steps.clear();
    e.stages[0].waiting = waiting;
    e.stages[0].min_trainers = 4;
    return diagnose(e);
  };
  auto zone = q("no live trainer in zone eu-west");
  REQUIRE(!zone.empty());
  CHECK(zone.front().rule == "unplaced");
  CHECK(zone.front().confidence >= 0.9);
  CHECK(q("needs an estimated 9.1 GiB per trainer; the largest live trainer in any zone can give 2.0 GiB").front().repair.front().find("train.batch=2") != std::string::npos);
  CHECK(q("a group of 4 trainers; any zone has 1 that can take it (draining ones excluded)").front().repair.front().find("trainers=1") != std::string::npos);
  CHECK(q("waiting for a free trainer: trainer-1 runs job-0/pretrain").front().confidence < 0.5);
}

TEST_CASE("contention: more threads than cores, and steps that slowed to under half their best") {
  auto e = healthy();
  e.stages[0].config.threads = 8;
  auto f = diagnose(e);
  REQUIRE(!f.empty());
  CHECK(f.front().rule == "contention");
  CHECK(f.front().repair.front().find("train.threads=2") != std::string::npos);
  auto g = healthy();
  for (int i = 31; i <= 60; ++i) g.stages[0].steps.push_back({std::uint64_t(i), 6.1 - 0.01 * i, 2e-3, 1.0, 1000, 256});
  CHECK(top(g) == "none");
  for (std::size_t i = 48; i < 60; ++i) g.stages[0].steps[i].tokens_per_s = 300;
  CHECK(top(g) == "contention");
  auto past = g;  // slowed for a while, then fast again: still named, as past
  for (int i = 61; i <= 72; ++i) past.stages[0].steps.push_back({std::uint64_t(i), 5.4, 2e-3, 1.0, 1000, 256});
  auto p = diagnose(past);
  REQUIRE(!p.empty());
  CHECK(p.front().rule == "contention");
  CHECK(p.front().evidence.front().find(" at 300 tokens/s, 1000 at its best") != std::string::npos);
  g.stages[0].steps.resize(30);  // a short run: its noise is no slowdown
  CHECK(top(g) == "none");
}

TEST_CASE("a site cut off and a late site of a cross-site stage are told apart") {
  auto e = healthy();
  e.state = "running";
  e.stages[0].state = "running";
  e.stages[0].sites = {{"site-0", "trainer-1", 40, 4, 3.1, 0.0, 4, 0, 0, 0, {}}, {"site-1", "trainer-2", 12, 1, 3.5, 95.0, 1, 2, 0, 3, {}}};
  CHECK(top(e) == "site_cut_off");
  auto g = healthy();
  g.stages[0].members = {"trainer-1", "trainer-2"};
  g.stages[0].sites = {{"site-0", "trainer-1", 40, 6, 3.1, 0.0, 6, 0, 0, 0, {}}, {"site-1", "trainer-2", 16, 3, 3.5, 0.5, 3, 0, 2, 0, {}}};
  CHECK(top(g) == "late_site");
  // As the cloud saw a real one: a site's polls slowed by its link, only the
  // other site's progress known, and that site waiting on the rounds half the time.
  auto w = healthy();
  w.stages[0].members = {"trainer@north.vm", "trainer@east.vm"};
  w.stages[0].started_unix_ns = 1'000'000'000'000;
  w.stages[0].finished_unix_ns = w.stages[0].started_unix_ns + 30'000'000'000;
  w.stages[0].sites = {{"north", "trainer@north.vm", 48, 6, 4.1, 15.0, 6, 0, 0, 0, {}}};
  auto f = diagnose(w);
  REQUIRE(!f.empty());
  CHECK(f.front().rule == "late_site");
  CHECK(f.front().evidence.back().find("north waited 15.0 s of the stage's 30.0 s for rounds to close: they waited on "
                                       "trainer@east.vm") != std::string::npos);
  // Under load: north waited 40 s, while east's deltas were all deferred — north is ahead, so not cut off.
  auto loaded = w;
  loaded.stages[0].sites = {{"east", "trainer@east.vm", 48, 0, 6.3, 0.05, 0, 10, 0, 0, {}},
                            {"north", "trainer@north.vm", 48, 6, 5.9, 40.2, 13, 5, 0, 0, {}}};
  loaded.stages[0].finished_unix_ns = loaded.stages[0].started_unix_ns + 109'000'000'000;
  CHECK(top(loaded) == "late_site");
  loaded.stages[0].sites[0].round = 6;  // level rounds, north waiting 40 s on them: late, not cut off
  CHECK(top(loaded) == "late_site");
  w.stages[0].sites[0].stall_s = 0.2;  // rounds that never waited: nothing late
  CHECK(top(w) == "none");
  // A site that never contributed fails the stage: cut off, named.
  auto cut = healthy();
  fail_with(cut, "ending the aggregation: ExportGlobal at tcp://127.0.0.1:4000: aggregation job-1.pretrain: site south "
                 "never contributed a delta the aggregator accepted; 2 of 2 must, 1 did (north)");
  auto c = diagnose(cut);
  REQUIRE(!c.empty());
  CHECK(c.front().rule == "site_cut_off");
  CHECK(c.front().repair.front().find("check south's link") != std::string::npos);
}

TEST_CASE("an hpo search with no finite trial is named, not as a plain divergence") {
  auto e = healthy();
  e.stages[0].hpo = true;
  e.stages[0].steps.clear();
  for (int t = 0; t < 3; ++t)
    e.events.push_back({std::uint64_t(t), "pretrain", "hpo_trial",
                        "trial " + std::to_string(t) + " (optim.lr=7.1) on trainer-1, step 100: failed (step 3: loss "
                        "30.1 diverged: 2.8x the run's start 10.9), stopped"});
  fail_with(e, "hpo search: no trial reached a finite validation loss");
  CHECK(top(e) == "hpo_all_diverged");
}

TEST_CASE("a failure no rule names is still reported, below any named cause") {
  auto e = healthy();
  fail_with(e, "something nobody foresaw");
  auto f = diagnose(e);
  REQUIRE(f.size() == 1);
  CHECK(f.front().rule == "unexplained_failure");
  CHECK(f.front().evidence.front() == "failed: stage pretrain: something nobody foresaw");
  auto d = healthy();
  fail_with(d, "data.text: /etc/passwd is outside the allowed roots /d/imports");
  auto g = diagnose(d);
  REQUIRE(g.size() == 2);
  CHECK(g.front().rule == "permission");
  CHECK(g.back().rule == "unexplained_failure");
}

TEST_CASE("the troubleshooting doc lists every rule with its repair steps") {
  const auto md = troubleshooting_markdown();
  for (const auto& r : rules()) {
    CHECK(md.find("\n## " + r.id + "\n") != std::string::npos);
    for (const auto& step : r.repair) CHECK(md.find(step) != std::string::npos);
  }
}
