// An hpo stage in the job manager, with simulated trainers: trial segments go
// to any free trainer, each rung's report is decided at once (a promoted trial
// goes on on the same trainer, a pruned one's trainer takes another trial in
// the same reply), and the best trial's config and checkpoint become the
// stage's result, which the next stage inherits. Time is injected.
#include "services/scheduler/jobs/job_manager.hpp"
#include "services/scheduler/jobs/job_manager_testing.hpp"

#include "libs/runspec/run_config.hpp"

#include <doctest/doctest.h>

#include <cmath>
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

double lr_of(const assignment& a) {
  auto c = runspec::parse_run_config(a.config_toml, "trial");
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? std::string() : c.err().message));
  CHECK(c->kind == "lm");
  CHECK(c->steps == 90);  // every trial's schedule runs over R
  return double(c->lr);
}

struct fixture : testing::job_fixture {
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
      r.val_loss = synthetic_loss(lr_of(a), a.stop_at);
      r.checkpoint = a.out_dir + "/checkpoints/step-" + std::to_string(a.stop_at);
    }
    return r;
  }
  // One round: every trainer polls once (idle, or its segment ends).
  void round() {
    for (const std::string node : {"trainer@a", "trainer@b", "trainer@c"}) {
      auto h = held.find(node);
      if (h == held.end()) {
        poll_report idle;
        idle.node = node;
        idle.state = "idle";
        auto ans = jobs.poll(idle, now);
        if (ans.work && ans.work->stop_at > 0) held[node] = *ans.work;
        continue;
      }
      const assignment was = h->second;
      (void)jobs.poll(report(node, was, "running"), now);
      auto ans = jobs.poll(report(node, was, "succeeded"), now);
      held.erase(node);
      if (!ans.work || ans.work->stop_at == 0) continue;
      held[node] = *ans.work;
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

TEST_CASE_FIXTURE(fixture, "trials of a job run in the job's zone only, never on another zone's (a site's) free trainer") {
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
  round();
  CHECK(held.count("trainer@a") == 1);
  CHECK(held.count("trainer@b") == 0);  // idle, of another zone: issue 24 item 12
}
