// An hpo job over a real store (SQLite and PostgreSQL: CTest names end in
// [sqlite] / [postgres]), across a scheduler restart: what `loom job show`
// reads back is what the search wrote — the stage's step (steps granted) and
// total (the sweep) in one unit, the best trial's config as the stage's, and
// the best values in the next stage's config — not the submit-time row.
#include "libs/runspec/run_config.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "services/scheduler/jobs/job_manager.hpp"
#include "services/scheduler/jobs/job_manager_testing.hpp"
#include "services/scheduler/schema.hpp"
#include "loom/v1/jobs.pb.h"
#include "services/scheduler/wire.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace loom;
using namespace loom::scheduler;

namespace {
constexpr store::backend engine = store::testing::suite_backend;

// train.steps 6, R 90: the submit-time figure (6) is not the search's.
// One search; search_then_sft runs an sft stage after it with the best values.
const std::string search_tables = R"([train]
steps = 6
[optim]
min_lr = 1e-5
[stage.search]
kind = "hpo"
[hpo]
trials = 8
seed = 3
min_steps = 10
max_steps = 90
eta = 3
[hpo.space]
"optim.lr" = {log_uniform = [1e-4, 1e-2]}
)";
const std::string search_then_sft = "[job]\nstages = [\"search\", \"sft\"]\n" + search_tables +
                                    "[stage.sft]\n\"data.format\" = \"sft\"\n\"train.steps\" = 20\n";
const std::string search_only = "[job]\nstages = [\"search\"]\n" + search_tables;

struct store_fixture : testing::job_fixture {
  store::testing::scratch scratch = store::testing::scratch::make(engine, "hpo").value();
  std::unique_ptr<store::database> db = store::database::open(scratch.url()).value();
  std::unique_ptr<job_manager> mgr;
  std::map<std::string, assignment> held;

  store_fixture() {
    REQUIRE(store::migrate(*db, scheduler_migrations()).ok());
    restart();
    for (const char* n : {"trainer@a", "trainer@b"}) add_trainer(n);
    mgr->tick(nodes, now);
  }
  // keep_held: the trainers go on with what they hold (a scheduler restart
  // does not stop them); else they forget it (a test of stored figures only).
  void restart(bool keep_held = false) {
    mgr = std::make_unique<job_manager>(db.get(), "/jobs");
    REQUIRE(mgr->load(nodes, now).ok());
    mgr->tick(nodes, now);
    if (!keep_held) held.clear();
  }
  bool running(const std::string& id) { return mgr->find(id)->stages[0].state == "running"; }
  std::vector<std::string> event_kinds(const std::string& id) {
    std::vector<std::string> out;
    auto ev = db->with_read_transaction([&](store::transaction& tx) -> result<std::vector<std::string>> {
      auto rows = tx.query("SELECT kind FROM job_events WHERE job_id = $1 ORDER BY seq", {id});
      if (!rows) return rows.err();
      std::vector<std::string> k;
      for (const auto& r : *rows) k.push_back(*r.get_text(0));
      return k;
    });
    REQUIRE(ev.ok());
    return *ev;
  }
  // Every trainer polls once: idle ones take a segment, busy ones end theirs
  // with a loss that ranks the learning rates the same at every step.
  void round() {
    for (const std::string node : {"trainer@a", "trainer@b"}) {
      poll_report r;
      r.node = node;
      auto h = held.find(node);
      if (h == held.end()) {
        r.state = "idle";
      } else {
        const assignment& a = h->second;
        auto c = runspec::parse_run_config(a.config_toml, "trial");
        REQUIRE(c.ok());
        r.state = "succeeded";
        r.job = a.job;
        r.stage = a.stage;
        r.attempt = a.attempt;
        r.step = r.val_step = a.stop_at;
        r.val_loss = 2.0 + std::pow(std::log10(double(c->lr)) - std::log10(2e-3), 2) + 5.0 / double(a.stop_at);
        r.checkpoint = a.out_dir + "/checkpoints/step-" + std::to_string(a.stop_at);
      }
      auto ans = mgr->poll(r, now);
      held.erase(node);
      if (ans.work && ans.work->stop_at > 0) held[node] = *ans.work;
    }
  }
};

}  // namespace

TEST_CASE_FIXTURE(store_fixture, "a search across a scheduler restart shows the steps it granted out of its sweep, not of train.steps") {
  auto r = mgr->submit(args(search_then_sft), as("h1"), nodes, now);
  REQUIRE(r.ok());
  const std::string id = r->first->id;
  for (int i = 0; i < 6; ++i) round();
  const std::uint64_t granted = mgr->find(id)->stages[0].step;
  REQUIRE(granted > 6);
  restart(true);
  const job_rec* j = mgr->find(id);
  REQUIRE(j);
  CHECK(j->state == "running");
  CHECK(j->stages[0].step == granted);
  CHECK(j->stages[0].total_steps == 8 * 90);  // was 6: the row kept its submit-time figure
  CHECK(j->stages[0].step <= j->stages[0].total_steps);
}

// The search's result with restarts at every point of the search: the same
// best trial, loss and steps granted as one run without a restart, and the
// trainers' segments in flight go on (none is handed out twice).
TEST_CASE_FIXTURE(store_fixture, "a search resumes after a scheduler restart at any round and ends as one without a restart") {
  // One search at a time has the trainers: the job's next stage is cancelled with it.
  auto whole = mgr->submit(args(search_only), as("w0"), nodes, now);
  REQUIRE(whole.ok());
  const std::string wid = whole->first->id;
  int rounds = 0;
  for (; rounds < 80 && running(wid); ++rounds) round();
  REQUIRE(mgr->find(wid)->stages[0].state == "succeeded");
  const hpo_best_rec want = mgr->find(wid)->stages[0].hpo_best;
  REQUIRE(want.trial >= 0);
  CHECK(mgr->find(wid)->stages[0].hpo_search.empty());  // a finished search keeps no state
  for (int at = 1; at < rounds; at += 2) {
    CAPTURE(at);
    auto r = mgr->submit(args(search_only), as("w" + std::to_string(at)), nodes, now);
    REQUIRE(r.ok());
    const std::string id = r->first->id;
    for (int i = 0; i < at && running(id); ++i) round();
    REQUIRE(running(id));
    CHECK(!mgr->find(id)->stages[0].hpo_search.empty());
    restart(true);
    REQUIRE(running(id));
    for (int i = 0; i < 80 && running(id); ++i) round();
    const job_rec* j = mgr->find(id);
    REQUIRE(j->stages[0].state == "succeeded");
    const hpo_best_rec& got = j->stages[0].hpo_best;
    CHECK(got.trial == want.trial);
    CHECK(got.values == want.values);
    CHECK(got.validation_loss == want.validation_loss);
    CHECK(got.steps_granted == want.steps_granted);  // no segment granted twice
    const auto kinds = event_kinds(id);
    CHECK(std::count(kinds.begin(), kinds.end(), "hpo_resumed") == 1);
    const auto whole_kinds = event_kinds(wid);
    CHECK(std::count(kinds.begin(), kinds.end(), "hpo_trial") ==
          std::count(whole_kinds.begin(), whole_kinds.end(), "hpo_trial"));
  }
}

TEST_CASE_FIXTURE(store_fixture, "a trainer holding a segment the restarted scheduler never stored is stopped, its report refused") {
  auto r = mgr->submit(args(search_then_sft), as("lost"), nodes, now);
  REQUIRE(r.ok());
  const std::string id = r->first->id;
  for (int i = 0; i < 3; ++i) round();
  REQUIRE(held.count("trainer@a"));
  const assignment stored = held.at("trainer@a");
  restart(true);
  // What trainer@a would run had the lost scheduler promoted it unsaved: the next attempt.
  poll_report run;
  run.node = "trainer@a";
  run.state = "running";
  run.job = stored.job;
  run.stage = stored.stage;
  run.attempt = stored.attempt + 1;
  run.step = stored.stop_at + 1;
  CHECK(mgr->poll(run, now).stop);  // not the segment the search holds for it
  run.state = "succeeded";
  run.val_step = run.step = stored.stop_at * 3;
  run.val_loss = 0.5;  // would win the search
  auto ans = mgr->poll(run, now);
  CHECK(ans.refused.find("is not applied") != std::string::npos);
  // Idle again, it is given the stored segment under the attempt it held.
  poll_report idle;
  idle.node = "trainer@a";
  idle.state = "idle";
  ans = mgr->poll(idle, now);
  REQUIRE(ans.work);
  CHECK(ans.work->stage == stored.stage);
  CHECK(ans.work->attempt == stored.attempt);
  CHECK(ans.work->stop_at == stored.stop_at);
  held["trainer@a"] = *ans.work;
  for (int i = 0; i < 80 && running(id); ++i) round();
  CHECK(mgr->find(id)->stages[0].state == "succeeded");
  CHECK(mgr->find(id)->stages[0].hpo_best.validation_loss > 1.0);  // the refused 0.5 never counted
}

TEST_CASE_FIXTURE(store_fixture, "a stored search that is garbled or not this search's fails the job naming why") {
  auto r = mgr->submit(args(search_then_sft), as("bad"), nodes, now);
  REQUIRE(r.ok());
  const std::string id = r->first->id;
  for (int i = 0; i < 4; ++i) round();
  const std::string stored = mgr->find(id)->stages[0].hpo_search;
  REQUIRE(stored.find("\"journal\"") != std::string::npos);
  auto set = [&](const std::string& text) {
    REQUIRE(db->with_transaction([&](store::transaction& tx) -> status {
                auto w = tx.exec("UPDATE job_stages SET state = 'running', hpo_search = $2 WHERE job_id = $1 AND idx = 0",
                                 {id, text});
                if (!w) return w.err();
                auto k = tx.exec("UPDATE jobs SET state = 'running', message = '' WHERE id = $1", {id});
                return k ? ok_status() : k.err();
              }).ok());
  };
  set("{\"v\":1,\"journal\":[[\"x\",0,0,10]],\"trials\":[],\"placed\":[]}");
  restart();
  CHECK(mgr->find(id)->state == "failed");
  CHECK(mgr->find(id)->message.find("does not read: journal entry kind \"x\"") != std::string::npos);
  // The first segment said to be another trial's: the replay names the entry.
  std::string other = stored;
  const auto at = other.find("[\"s\",0,");
  REQUIRE(at != std::string::npos);
  other.replace(at, 7, "[\"s\",5,");
  set(other);
  restart();
  CHECK(mgr->find(id)->state == "failed");
  CHECK(mgr->find(id)->message.find("journal entry 1 of") != std::string::npos);
  CHECK(mgr->find(id)->message.find("it recorded trial 5") != std::string::npos);
  set("");
  restart();
  CHECK(mgr->find(id)->message.find("before schema v14") != std::string::npos);
}

TEST_CASE_FIXTURE(store_fixture, "a finished search's result survives a restart: the best config and the next stage's values") {
  auto r = mgr->submit(args(search_then_sft), as("h2"), nodes, now);
  REQUIRE(r.ok());
  const std::string id = r->first->id;
  for (int i = 0; i < 80 && mgr->find(id)->stages[0].state == "running"; ++i) round();
  const job_rec* before = mgr->find(id);
  REQUIRE(before->stages[0].state == "succeeded");
  const std::string best_config = before->stages[0].config_toml, sft_config = before->stages[1].config_toml;
  auto best = runspec::parse_run_config(best_config, "best");
  REQUIRE(best.ok());
  restart();
  const job_rec* j = mgr->find(id);
  REQUIRE(j);
  CHECK(j->stages[0].config_toml == best_config);
  CHECK(j->stages[1].config_toml == sft_config);  // runs with the best values after the restart too
  auto sft = runspec::parse_run_config(j->stages[1].config_toml, "sft", {"model.init_from=\"/x\""});
  REQUIRE(sft.ok());
  CHECK(double(sft->lr) == doctest::Approx(double(best->lr)));
  CHECK(j->stages[0].total_steps == 8 * 90);
}

TEST_CASE_FIXTURE(store_fixture, "a finished search's typed best trial survives a restart") {
  auto r = mgr->submit(args(search_then_sft), as("h3"), nodes, now);
  REQUIRE(r.ok());
  const std::string id = r->first->id;
  for (int i = 0; i < 80 && mgr->find(id)->stages[0].state == "running"; ++i) round();
  REQUIRE(mgr->find(id)->stages[0].state == "succeeded");
  const hpo_best_rec before = mgr->find(id)->stages[0].hpo_best;
  REQUIRE(before.trial >= 0);
  REQUIRE(before.values.size() == 1);
  restart();
  const job_rec* j = mgr->find(id);
  REQUIRE(j);
  const hpo_best_rec& b = j->stages[0].hpo_best;
  CHECK(b.trial == before.trial);
  CHECK(b.values == before.values);
  CHECK(b.validation_loss == before.validation_loss);
  CHECK(b.step == 90);
  CHECK(b.checkpoint == before.checkpoint);
  CHECK(b.steps_granted == before.steps_granted);
  CHECK(b.sweep_steps == 8 * 90);
  CHECK(j->stages[1].hpo_best.trial == -1);  // the sft stage has none
}

// Not an hpo matter, but the same store and restart: a stage's matmul
// precision (issue 28) as its trainer reported it is stored (migration v13)
// and read back, and anything but fp32 or bf16 from a trainer is ignored.
TEST_CASE_FIXTURE(store_fixture, "the precision a trainer reports for its stage is kept across a restart, free text is not") {
  auto r = mgr->submit(args("[job]\nstages = [\"pretrain\"]\n[train]\nsteps = 10\n"), as("p1"), nodes, now);
  REQUIRE(r.ok());
  const std::string id = r->first->id;
  poll_report idle;
  idle.node = "trainer@a";
  idle.state = "idle";
  auto ans = mgr->poll(idle, now);
  REQUIRE(ans.work);
  poll_report run;
  run.node = "trainer@a";
  run.state = "running";
  run.job = id;
  run.stage = "pretrain";
  run.attempt = ans.work->attempt;
  run.step = 1;
  run.precision = "<script>";  // not a precision: never stored
  (void)mgr->poll(run, now);
  CHECK(mgr->find(id)->stages[0].precision.empty());
  run.step = 2;
  run.precision = "bf16";
  (void)mgr->poll(run, now);
  CHECK(mgr->find(id)->stages[0].precision == "bf16");
  restart();
  CHECK(mgr->find(id)->stages[0].precision == "bf16");
  loom::v1::JobInfo info;
  to_wire(*mgr->find(id), &info);
  CHECK(info.stages(0).precision() == "bf16");
}

// Not an hpo matter either: a stage switch a failed store write lost (the
// chaos harness on PostgreSQL found it: the stage's end stored, the next
// stage's queueing not) is taken up again at the next load, and the switch
// is now stored with the stage's end in one unit.
TEST_CASE_FIXTURE(store_fixture, "a job left with its next stage pending after a succeeded one has that stage queued at load") {
  auto r = mgr->submit(args("[job]\nstages = [\"pretrain\", \"sft\"]\n[train]\nsteps = 10\n[stage.sft]\n\"data.format\" = \"sft\"\n"),
                       as("switch"), nodes, now);
  REQUIRE(r.ok());
  const std::string id = r->first->id;
  REQUIRE(db->with_transaction([&](store::transaction& tx) -> status {
                auto a = tx.exec("UPDATE job_stages SET state = 'succeeded', checkpoint = '/jobs/x/pretrain/checkpoints/step-000010' "
                                 "WHERE job_id = $1 AND idx = 0", {id});
                if (!a) return a.err();
                auto b = tx.exec("UPDATE job_stages SET state = 'pending' WHERE job_id = $1 AND idx = 1", {id});
                if (!b) return b.err();
                auto c = tx.exec("UPDATE jobs SET state = 'running' WHERE id = $1", {id});
                return c ? ok_status() : c.err();
              }).ok());
  restart();
  const job_rec* j = mgr->find(id);
  REQUIRE(j);
  CHECK(j->state == "running");
  CHECK(j->stages[1].state == "running");  // queued, and placed at once on a free trainer
  const auto kinds = event_kinds(id);
  REQUIRE(kinds.size() >= 2);
  CHECK(kinds[kinds.size() - 2] == "queued");
  CHECK(kinds.back() == "placed");
  // Its trainer is handed it.
  int handed = 0;
  for (const char* node : {"trainer@a", "trainer@b"}) {
    poll_report idle;
    idle.node = node;
    idle.state = "idle";
    auto ans = mgr->poll(idle, now);
    handed += ans.work && ans.work->stage == "sft";
  }
  CHECK(handed == 1);
}
