// An hpo stage in the job manager, with simulated trainers: trial segments go
// to free trainers of the job's zone, each rung's report is decided at once (a promoted trial
// goes on on the same trainer, a pruned one's trainer takes another trial in
// the same reply), and the best trial's config and checkpoint become the
// stage's result, which the next stage inherits. Time is injected.
#include "services/scheduler/jobs/job_manager.hpp"
#include "services/scheduler/jobs/job_manager_testing.hpp"

#include "libs/runspec/run_config.hpp"
#include "loom/v1/jobs.pb.h"
#include "services/scheduler/wire.hpp"

#include <doctest/doctest.h>

#include "libs/files/temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

using namespace loom;
using namespace loom::scheduler;

namespace {

constexpr const char* search_then_sft = R"([job]
stages = ["search", "sft"]
[train]
steps = 90
[optim]
min_lr = 1e-5
[stage.search]
kind = "hpo"
[stage.sft]
"data.format" = "sft"
"train.steps" = 20
[hpo]
trials = 8
seed = 3
min_steps = 10
max_steps = 90
eta = 3
[hpo.space]
"optim.lr" = {log_uniform = [1e-4, 1e-2]}
)";

// A learning curve with the same ranking at every step: best near lr = 2e-3.
double synthetic_loss(double lr, std::uint64_t step) {
  const double off = std::log10(lr) - std::log10(2e-3);
  return 2.0 + off * off + 5.0 / double(step);
}

double lr_of(const assignment& a, std::int64_t R = 90) {
  auto c = runspec::parse_run_config(a.config_toml, "trial");
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? std::string() : c.err().message));
  CHECK(c->kind == "lm");
  CHECK(c->steps == R);  // every trial's schedule runs over R
  return double(c->lr);
}

struct fixture : testing::job_fixture {
  job_manager* m = &jobs;                  // the manager the trainers poll
  std::int64_t R = 90;                     // the search's max_steps
  bool make_dirs = false;                  // the trainers create each segment's out_dir, as a trainer does
  std::map<std::string, assignment> held;  // trainer -> the segment it runs
  int handed_on = 0;                       // a segment's end answered with another trial's segment
  int promoted_in_place = 0;               // ... with the same trial's next rung
  std::set<int> trials_seen;

  poll_report report(const std::string& node, const assignment& a, const std::string& state) {
    poll_report r;
    r.node = node;
    r.state = state;
    r.job = a.job;
    r.stage = a.stage;
    r.attempt = a.attempt;
    if (state == "succeeded") {
      r.step = a.stop_at;
      r.val_step = a.stop_at;
      r.val_loss = synthetic_loss(lr_of(a, R), a.stop_at);
      r.checkpoint = a.out_dir + "/checkpoints/step-" + std::to_string(a.stop_at);
    }
    return r;
  }
  // One round: every trainer polls once (idle, or its segment ends).
  void hold(const std::string& node, const assignment& a) {
    held[node] = a;
    if (!make_dirs) return;
    std::error_code ec;
    std::filesystem::create_directories(a.out_dir + "/checkpoints", ec);
    REQUIRE(!ec);
  }
  void round() {
    for (const std::string node : {"trainer@a", "trainer@b", "trainer@c"}) {
      auto h = held.find(node);
      if (h == held.end()) {
        poll_report idle;
        idle.node = node;
        idle.state = "idle";
        auto ans = m->poll(idle, now);
        if (ans.work && ans.work->stop_at > 0) hold(node, *ans.work);
        continue;
      }
      const assignment was = h->second;
      (void)m->poll(report(node, was, "running"), now);
      auto ans = m->poll(report(node, was, "succeeded"), now);
      held.erase(node);
      if (!ans.work || ans.work->stop_at == 0) continue;
      hold(node, *ans.work);
      if (ans.work->stage == was.stage) ++promoted_in_place;
      else ++handed_on;
    }
  }
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "an hpo stage runs ASHA on free trainers, frees pruned trials' trainers at once and hands its best on") {
  for (const char* n : {"trainer@a", "trainer@b", "trainer@c"}) add_trainer(n);
  jobs.tick(nodes, now);
  const job_rec* j = submit_template("r1", search_then_sft);
  CHECK(j->stages[0].state == "running");
  CHECK(j->stages[0].total_steps == 8 * 90);  // the full sweep

  // The first segments: new trials to the first rung, one per trainer.
  round();
  REQUIRE(held.size() == 3);
  for (const auto& [node, a] : held) {
    CHECK(a.stop_at == 10);
    CHECK(a.stage.rfind("search.t", 0) == 0);
    CHECK(a.out_dir == "/jobs/" + j->id + "/search/trial-" + a.stage.substr(8));
    CHECK(a.init_from.empty());
  }
  for (int i = 0; i < 60 && j->stages[0].state == "running"; ++i) round();
  REQUIRE(j->stages[0].state == "succeeded");

  // The sweep's best by the same curves: ASHA found it and trained it to R.
  auto all = runspec::parse_run_config(j->stages[0].config_toml, "best");
  REQUIRE(all.ok());
  CHECK(all->kind == "lm");  // the stage's result: the best trial's run config
  const double best_lr = double(all->lr);
  CHECK(std::fabs(std::log10(best_lr) - std::log10(2e-3)) < 0.5);
  CHECK(j->stages[0].checkpoint.find("/search/trial-") != std::string::npos);
  CHECK(j->stages[0].checkpoint.find("/checkpoints/step-90") != std::string::npos);
  CHECK(j->stages[0].loss == doctest::Approx(synthetic_loss(best_lr, 90)));
  // Spent: at most 40% of the sweep's steps.
  CHECK(j->stages[0].step <= 8 * 90 * 4 / 10);
  CHECK(j->stages[0].step >= 8 * 10);
  // Pruned trials freed their trainers for other trials in the same reply;
  // promoted ones went on where they were.
  CHECK(handed_on >= 3);
  CHECK(promoted_in_place >= 1);

  // The next stage runs with the best learning rate, from the best trial's checkpoint.
  CHECK(j->stages[1].state == "running");
  assignment sft;
  for (int i = 0; i < 3 && sft.job.empty(); ++i)
    for (const char* n : {"trainer@a", "trainer@b", "trainer@c"}) {
      poll_report idle;
      idle.node = n;
      idle.state = "idle";
      auto ans = jobs.poll(idle, now);
      if (ans.work && ans.work->stage == "sft") sft = *ans.work;
    }
  REQUIRE(!sft.job.empty());
  CHECK(sft.stop_at == 0);
  const std::string ckpt = j->stages[0].checkpoint;
  CHECK(sft.init_from == ckpt.substr(0, ckpt.find("/checkpoints/")) + "/checkpoints");
  auto sft_cfg = runspec::parse_run_config(sft.config_toml, "sft", {"model.init_from=\"/x\""});
  REQUIRE(sft_cfg.ok());
  CHECK(double(sft_cfg->lr) == doctest::Approx(best_lr));
  CHECK(sft_cfg->steps == 20);
}

TEST_CASE_FIXTURE(fixture, "a finished search's best trial is a typed field of its stage, on the wire too") {
  for (const char* n : {"trainer@a", "trainer@b", "trainer@c"}) add_trainer(n);
  jobs.tick(nodes, now);
  const job_rec* j = submit_template("typed", search_then_sft);
  CHECK(j->stages[0].hpo_best.trial == -1);  // none while the search runs
  for (int i = 0; i < 60 && j->stages[0].state == "running"; ++i) round();
  REQUIRE(j->stages[0].state == "succeeded");

  const stage_rec& s = j->stages[0];
  const hpo_best_rec& b = s.hpo_best;
  REQUIRE(b.trial >= 0);
  CHECK(b.trial < 8);
  // The trial whose checkpoint is the stage's result, scored at R with the loss the stage shows.
  CHECK(b.checkpoint == s.checkpoint);
  CHECK(s.checkpoint.find("/search/trial-" + std::to_string(b.trial) + "/checkpoints/") != std::string::npos);
  CHECK(b.step == 90);
  CHECK(b.validation_loss == s.loss);
  CHECK(b.steps_granted == s.step);
  CHECK(b.sweep_steps == 8 * 90);
  // Its values: the one searched key, the learning rate the stage's config now has.
  REQUIRE(b.values.size() == 1);
  CHECK(b.values[0].first == "optim.lr");
  auto cfg = runspec::parse_run_config(s.config_toml, "best");
  REQUIRE(cfg.ok());
  CHECK(std::stod(b.values[0].second) == doctest::Approx(double(cfg->lr)).epsilon(1e-5));
  CHECK(b.validation_loss == doctest::Approx(synthetic_loss(double(cfg->lr), 90)));
  CHECK(j->stages[1].hpo_best.trial == -1);  // not an hpo stage

  loom::v1::JobInfo info;
  to_wire(*j, &info);
  REQUIRE(info.stages_size() == 2);
  REQUIRE(info.stages(0).has_hpo_best());
  const auto& w = info.stages(0).hpo_best();
  CHECK(w.trial() == std::uint32_t(b.trial));
  REQUIRE(w.values_size() == 1);
  CHECK(w.values(0).key() == "optim.lr");
  CHECK(w.values(0).value() == b.values[0].second);
  CHECK(w.validation_loss() == b.validation_loss);
  CHECK(w.step() == 90);
  CHECK(w.checkpoint() == s.checkpoint);
  CHECK(w.steps_granted() == s.step);
  CHECK(w.sweep_steps() == 8 * 90);
  CHECK_FALSE(info.stages(1).has_hpo_best());
}

TEST_CASE_FIXTURE(fixture, "a failed trial stops for good, and cancelling the job stops every running trial") {
  for (const char* n : {"trainer@a", "trainer@b", "trainer@c"}) add_trainer(n);
  jobs.tick(nodes, now);
  const job_rec* j = submit_template("r2", search_then_sft);
  round();
  REQUIRE(held.count("trainer@a"));
  const assignment a = held["trainer@a"];
  poll_report failed = report("trainer@a", a, "failed");
  failed.message = "loss is NaN";
  auto ans = jobs.poll(failed, now);
  REQUIRE(ans.work);  // its trainer takes the next trial at once
  CHECK(ans.work->stage != a.stage);
  held["trainer@a"] = *ans.work;

  auto c = jobs.cancel(j->id, "enough", as("c1"), now);
  REQUIRE(c.ok());
  for (const char* n : {"trainer@a", "trainer@b", "trainer@c"}) {
    auto stop = jobs.poll(report(n, held[n], "running"), now);
    CHECK(stop.stop);
    CHECK(!stop.work);
  }
  CHECK(j->state == "cancelled");
}

TEST_CASE_FIXTURE(fixture, "trials of a job in one zone run on that zone's trainers only, as its other stages") {
  add_trainer("trainer@a");  // zone "local", the job's
  node edge;
  edge.id = "trainer@b";
  edge.service = "trainer";
  edge.zone = "edge-1";  // an edge site's trainer
  edge.resources.cpu_cores = 8;
  edge.resources.memory_bytes = 16ull << 30;
  nodes.register_node(edge, now);
  jobs.tick(nodes, now);
  auto a = args(search_then_sft);
  a.zone = "local";
  auto r = jobs.submit(a, as("z1"), nodes, now);
  REQUIRE(r.ok());
  for (int i = 0; i < 4; ++i) {
    round();
    CHECK(held.count("trainer@a") == 1);
    CHECK(held.count("trainer@b") == 0);  // never on the edge site's trainer
  }
  // The job's page says where its trials run.
  const auto waiting = jobs.find(r->first->id);
  REQUIRE(waiting);
  CHECK(waiting->stages[0].state == "running");
}

namespace {

// A search whose trials differ in memory: train.batch 2 or 24 (GPT-2 small, seq_len 64).
constexpr const char* batch_search = R"(kind = "hpo"
[job]
stages = ["search"]
[train]
steps = 30
[optim]
min_lr = 1e-5
[hpo]
method = "grid"
min_steps = 10
max_steps = 30
eta = 3
[hpo.space]
"train.batch" = {choice = [2, 24]}
"optim.lr" = {choice = [1e-3, 2e-3]}
)";

}  // namespace

TEST_CASE_FIXTURE(fixture, "each trial is placed by its own memory need: a large batch never lands on a small trainer") {
  R = 30;
  auto plan = runspec::resolve_template("t", batch_search, {"text=/data/corpus.txt"});
  REQUIRE(plan.ok());
  const std::uint64_t small = plan->stages[0].spec.memory().total();  // batch 4: more than batch 2's
  const std::uint64_t large = plan->stages[0].sizing.memory().total();
  REQUIRE(plan->stages[0].sizing.batch == 24);
  REQUIRE(large > small);
  add_trainer("trainer@a", large * 2);       // takes any trial
  add_trainer("trainer@b", small * 4 / 3 + (16 << 20));  // 3/4 of it fits batch 2 only
  jobs.tick(nodes, now);
  auto r = jobs.submit(args(batch_search), as("m1"), nodes, now);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.err().message));
  std::set<int> on_b;
  for (int i = 0; i < 30 && r->first->stages[0].state == "running"; ++i) {
    round();
    if (auto b = held.find("trainer@b"); b != held.end()) {
      auto c = runspec::parse_run_config(b->second.config_toml, "trial");
      REQUIRE(c.ok());
      CHECK(c->batch == 2);
      on_b.insert(c->batch);
    }
  }
  CHECK(r->first->stages[0].state == "succeeded");
  CHECK(on_b.size() == 1);  // trainer@b did take the small trials
}

TEST_CASE_FIXTURE(fixture, "a search refused at submit names the trial that needs the most memory and the trainer's") {
  add_trainer("trainer@a", 8ull << 30);
  jobs.tick(nodes, now);
  auto a = args(search_then_sft);
  a.overrides.push_back("hpo.trials=6");
  auto ok = jobs.submit(a, as("s0"), nodes, now);
  REQUIRE_MESSAGE(ok.ok(), (ok.ok() ? "" : ok.err().message));
  std::string text = search_then_sft;
  text += "\"train.batch\" = {int = [4, 65536]}\n";
  auto r = jobs.submit(args(text.c_str()), as("s1"), nodes, now);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  const std::string m = r.err().message;
  INFO(m);
  CHECK(m.find("stage search, trial ") != std::string::npos);
  CHECK(m.find(" train.batch=") != std::string::npos);
  CHECK(m.find("needs an estimated ") != std::string::npos);
  CHECK(m.find("can give it 6.00 GiB (3/4 of its memory)") != std::string::npos);
  CHECK(m.find("(for a search: in [hpo.space])") != std::string::npos);
}

namespace {

struct dir_fixture : fixture {
  files::temp_dir tmp{"loom-hpo-dirs"};
  job_manager own{nullptr, tmp.path() + "/jobs"};
  std::vector<std::pair<std::string, std::string>> events;  // (kind, text)
  dir_fixture() {
    m = &own;
    make_dirs = true;
    R = 30;
    own.set_event_sink([this](const job_rec&, const job_event& e) { events.emplace_back(e.kind, e.text); });
  }
  std::set<std::string> trial_dirs(const std::string& job) const {
    std::set<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(tmp.path() + "/jobs/" + job + "/search", ec))
      out.insert(e.path().filename().string());
    return out;
  }
};

}  // namespace

TEST_CASE_FIXTURE(dir_fixture, "pruned trials' directories go once ASHA can no longer promote them, the best's stays") {
  for (const char* n : {"trainer@a", "trainer@b", "trainer@c"}) add_trainer(n);
  own.tick(nodes, now);
  // R = 30 (rungs 10, 30): two trials reach R, so the search's end removes a finished one too.
  auto r = own.submit(args(search_then_sft, {"hpo.max_steps=30"}), as("d1"), nodes, now);
  REQUIRE(r.ok());
  const job_rec* j = r->first;
  bool removed_mid_search = false;
  for (int i = 0; i < 60 && j->stages[0].state == "running"; ++i) {
    round();
    const auto dirs = trial_dirs(j->id);
    for (const auto& [node, a] : held)  // a trial still running keeps its directory
      if (a.stage.rfind("search.t", 0) == 0) CHECK(dirs.count("trial-" + a.stage.substr(8)) == 1);
    if (j->stages[0].state == "running" &&
        std::any_of(events.begin(), events.end(), [](const auto& e) { return e.first == "hpo_removed"; }))
      removed_mid_search = true;
  }
  REQUIRE(j->stages[0].state == "succeeded");
  CHECK(removed_mid_search);
  const std::string ckpt = j->stages[0].checkpoint;
  const std::string best = ckpt.substr(ckpt.find("/trial-") + 1, ckpt.find("/checkpoints/") - ckpt.find("/trial-") - 1);
  CHECK(trial_dirs(j->id) == std::set<std::string>{best});  // only the result's
  CHECK(std::filesystem::is_directory(ckpt.substr(0, ckpt.find("/checkpoints/")) + "/checkpoints"));
  bool pruned_text = false, end_text = false;
  for (const auto& [kind, text] : events) {
    if (kind != "hpo_removed") continue;
    pruned_text |= text.find("pruned for good: no later result can promote them") != std::string::npos;
    end_text |= text.find("the search is over; the best, " + std::string("trial ") + best.substr(6) + ", is kept") !=
                std::string::npos;
  }
  CHECK(pruned_text);
  CHECK(end_text);
}

TEST_CASE_FIXTURE(fixture, "an hpo stage counts its sweep from submit: step (granted) and total are one unit") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  auto r = jobs.submit(args(search_then_sft), as("t1"), nodes, now);
  REQUIRE(r.ok());
  const job_rec* j = r->first;
  CHECK(j->stages[0].total_steps == 8 * 90);
  CHECK(j->stages[1].total_steps == 20);
  for (int i = 0; i < 3; ++i) round();
  CHECK(j->stages[0].step <= j->stages[0].total_steps);
}

TEST_CASE_FIXTURE(fixture, "a path into another tenant's job outputs is refused as if that job did not exist") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* mine = submit_template("o1", search_then_sft);  // tenant default
  const std::string held = "hpo.validation=/jobs/" + mine->id + "/search/trial-0/config.toml";
  auto other = jobs.submit(args(search_then_sft, {held}), as("o2", "", "bob", "operator", "other"), nodes, now);
  REQUIRE_FALSE(other.ok());
  CHECK(other.code() == errc::not_found);
  CHECK(other.err().message == "stage search: hpo.validation /jobs/" + mine->id +
                                   "/search/trial-0/config.toml: no job " + mine->id +
                                   " in tenant other (a stage reads the job outputs of its own tenant only)");
  auto init = jobs.submit(args(search_then_sft, {"model.init_from=/jobs/job-999999/pretrain/checkpoints"}),
                          as("o3", "", "bob", "operator", "other"), nodes, now);
  CHECK(init.code() == errc::not_found);  // a job that does not exist answers the same
  CHECK(jobs.submit(args(search_then_sft, {held}), as("o4"), nodes, now).ok());  // the same tenant's: taken
  CHECK(jobs.submit(args(search_then_sft, {held}), as("o5", "", "root", "admin", "other"), nodes, now).ok());
}

TEST_CASE_FIXTURE(dir_fixture, "what a trainer noticed running a trial is a job event of the search, naming the trial, once") {
  for (const char* n : {"trainer@a", "trainer@b", "trainer@c"}) add_trainer(n);
  own.tick(nodes, now);
  REQUIRE(own.submit(args(search_then_sft, {"hpo.max_steps=30"}), as("n1"), nodes, now).ok());
  round();
  REQUIRE(held.count("trainer@a"));
  const assignment a = held["trainer@a"];
  const std::string trial = a.stage.substr(a.stage.rfind(".t") + 2);  // "search.t3" -> "3"
  auto count = [&](const std::string& kind, const std::string& text) {
    return std::count(events.begin(), events.end(), std::pair<std::string, std::string>{kind, text});
  };
  poll_report running = report("trainer@a", a, "running");
  running.notices.push_back({100, "stage_process", "runs in process 4242 under setrlimit (memory only)"});
  auto ans = own.poll(running, now);
  CHECK(ans.notices_acked == 100);
  CHECK(count("stage_process", "trial " + trial + ": runs in process 4242 under setrlimit (memory only)") == 1);
  // Sent again before the trainer saw the acknowledgement: not recorded twice.
  ans = own.poll(running, now);
  CHECK(ans.notices_acked == 100);
  CHECK(count("stage_process", "trial " + trial + ": runs in process 4242 under setrlimit (memory only)") == 1);
  // A notice that comes with the segment's end is recorded and acknowledged too.
  poll_report done = report("trainer@a", a, "succeeded");
  done.notices = running.notices;
  done.notices.push_back({200, "stage_crashed", "its process 4242 killed by signal 9 (Killed); restarting from its latest snapshot"});
  ans = own.poll(done, now);
  CHECK(ans.notices_acked == 200);
  CHECK(count("stage_crashed", "trial " + trial + ": its process 4242 killed by signal 9 (Killed); restarting from its "
                               "latest snapshot") == 1);
  // Another trainer's report naming this trial is not its segment: nothing recorded.
  poll_report stranger = report("trainer@b", a, "running");
  stranger.attempt = a.attempt + 7;
  stranger.notices.push_back({300, "rollback", "forged"});
  (void)own.poll(stranger, now);
  CHECK(count("rollback", "trial " + trial + ": forged") == 0);
}
