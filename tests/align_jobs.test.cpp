// Cross-process: the alignment pipelines through `loom up`, each with kill -9
// of the trainer during its alignment stage. pipeline-dpo-tiny (pretrain ->
// SFT -> DPO): the job succeeds, the DPO stage ran more than once and resumed
// from its snapshot, its final parameters equal an uninterrupted job's bitwise,
// and its held-out preference accuracy rose (eval.json, before -> after); the
// stage switch (the last SFT step to the first DPO step, seen in the stages'
// metrics logs) is measured and printed. pipeline-rlhf-tiny (pretrain -> SFT ->
// RM -> RL): the same for the rl stage, rewarded by the rm stage's checkpoint,
// with its held-out mean reward rising and its KL within the template's bound.
#include "libs/files/files.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Whole seconds from now to `deadline` (at least one): a wait_done limit.
std::chrono::seconds remaining(std::chrono::steady_clock::time_point deadline) {
  return std::max(1s, std::chrono::duration_cast<std::chrono::seconds>(deadline - std::chrono::steady_clock::now()));
}

}  // namespace

TEST_CASE("pipeline-dpo-tiny survives kill -9 of the trainer in the dpo stage and held-out preference accuracy rises") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  auto sub = loom_json(home.path(), {"job", "submit", "--template", "pipeline-dpo-tiny", "--set",
                                     "text=/usr/share/common-licenses/GPL-3"});
  REQUIRE(sub.contains("id"));
  const std::string id = sub["id"].get<std::string>();
  const std::string out = loom_json(home.path(), {"job", "show", id})["out_dir"].get<std::string>();
  const std::string sft_log = out + "/sft/metrics.jsonl", dpo_log = out + "/dpo/metrics.jsonl";

  // The stage switch: when SFT's last step (20) is logged, then DPO's first.
  const auto deadline = std::chrono::steady_clock::now() + 150s;
  wait_logged_step(sft_log, 20, deadline);
  const auto sft_done = std::chrono::steady_clock::now();
  wait_logged_step(dpo_log, 1, deadline);
  const double switch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sft_done).count();
  MESSAGE("stage switch sft -> dpo: " << switch_s << " s (last sft step to first dpo step logged)");
  CHECK(switch_s < 60);

  // kill -9 once the DPO stage has logged step 12 (it snapshots every 10).
  wait_logged_step(dpo_log, 12, deadline);
  const long old = pid_of(home.path(), "trainer");
  REQUIRE(old > 0);
  REQUIRE(::kill(static_cast<pid_t>(old), SIGKILL) == 0);
  MESSAGE("killed the trainer at dpo step >= 12 (logged " << last_logged_step(dpo_log) << ")");

  json j = wait_done(home.path(), id, remaining(deadline));
  INFO(j.dump());
  REQUIRE(j.value("state", "") == "succeeded");
  REQUIRE(j["stages"].size() == 3);
  CHECK(j["stages"][2]["attempts"].get<int>() >= 2);
  CHECK(j["stages"][2]["step"] == 30);
  auto eval_text = files::read_file(out + "/dpo/eval.json");
  REQUIRE(eval_text.ok());
  const json eval = json::parse(*eval_text);
  const double before = eval["before"]["accuracy"].get<double>(), after = eval["after"]["accuracy"].get<double>();
  MESSAGE("dpo held-out preference accuracy " << before << " -> " << after << ", policy accuracy "
                                              << eval["before"]["policy_accuracy"] << " -> "
                                              << eval["after"]["policy_accuracy"] << ", KL " << eval["after"]["kl"]);
  CHECK(after > before);
  // `loom job show` gives the same figures (the model registry's version of the stage).
  CHECK(j["stages"][2]["eval"]["after"]["accuracy"].get<double>() == after);
  // The resumed stage's log reads as one run: steps 1..30, each once.
  auto log = files::read_file(dpo_log);
  REQUIRE(log.ok());
  CHECK(std::count(log->begin(), log->end(), '\n') == 30);

  // An uninterrupted job of the same template ends with the same parameters, bitwise.
  auto ref = loom_json(home.path(), {"job", "submit", "--template", "pipeline-dpo-tiny", "--set",
                                     "text=/usr/share/common-licenses/GPL-3"});
  REQUIRE(ref.contains("id"));
  json r = wait_done(home.path(), ref["id"].get<std::string>(), remaining(deadline + 60s));
  REQUIRE(r.value("state", "") == "succeeded");
  CHECK(final_params_sha(j, "dpo") == final_params_sha(r, "dpo"));
}

TEST_CASE("pipeline-rlhf-tiny survives kill -9 of the trainer in the rl stage, resumes bitwise and the held-out reward rises") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  const std::vector<std::string> submit = {"job", "submit", "--template", "pipeline-rlhf-tiny", "--set",
                                           "text=/usr/share/common-licenses/GPL-3"};
  auto sub = loom_json(home.path(), submit);
  REQUIRE(sub.contains("id"));
  const std::string id = sub["id"].get<std::string>();
  const std::string out = loom_json(home.path(), {"job", "show", id})["out_dir"].get<std::string>();
  const std::string rl_log = out + "/rl/metrics.jsonl";

  // kill -9 once the rl stage has logged step 12 (it snapshots every 10 of its 20).
  const auto deadline = std::chrono::steady_clock::now() + 150s;
  wait_logged_step(rl_log, 12, deadline);
  const long old = pid_of(home.path(), "trainer");
  REQUIRE(old > 0);
  REQUIRE(::kill(static_cast<pid_t>(old), SIGKILL) == 0);
  MESSAGE("killed the trainer at rl step >= 12 (logged " << last_logged_step(rl_log) << ")");

  json j = wait_done(home.path(), id, remaining(deadline));
  INFO(j.dump());
  REQUIRE(j.value("state", "") == "succeeded");
  REQUIRE(j["stages"].size() == 4);
  const json& rl = j["stages"][3];
  CHECK(rl["name"] == "rl");
  CHECK(rl["attempts"].get<int>() >= 2);
  CHECK(rl["step"] == 20);
  // The second attempt resumed from the rl stage's step-10 snapshot, not from SFT.
  auto trainer_log = files::read_file(home.path() + "/logs/trainer.log");
  REQUIRE(trainer_log.ok());
  CHECK(trainer_log->find("resumed from " + out + "/rl/checkpoints/step-000010 (step 10)") != std::string::npos);
  // The resumed stage's log reads as one run: steps 1..20, each once, in order.
  CHECK(logged_steps(rl_log) == steps_up_to(20));

  auto eval_text = files::read_file(out + "/rl/eval.json");
  REQUIRE(eval_text.ok());
  const json eval = json::parse(*eval_text);
  const json &before = eval["before"], &after = eval["after"];
  MESSAGE("rl held-out mean reward " << before["mean_reward"] << " (std " << before["reward_std"] << ") -> "
                                     << after["mean_reward"] << ", KL " << before["kl"] << " -> " << after["kl"]
                                     << ", entropy " << before["entropy"] << " -> " << after["entropy"]
                                     << ", response length " << before["mean_length"] << " -> " << after["mean_length"]);
  CHECK(after["mean_reward"].get<double>() > before["mean_reward"].get<double>());
  CHECK(eval.value("kl_within_bound", false));
  // `loom job show` gives the alignment stages' evals from the model registry, in JSON and in words.
  CHECK(j["stages"][3]["eval"]["before"]["mean_reward"].get<double>() == before["mean_reward"].get<double>());
  CHECK(j["stages"][3]["eval"]["after"]["kl"].get<double>() == after["kl"].get<double>());
  const json& rm_eval = j["stages"][2]["eval"];
  MESSAGE("rm held-out accuracy " << rm_eval["before"]["accuracy"] << " -> " << rm_eval["after"]["accuracy"]);
  CHECK(rm_eval["after"]["accuracy"].get<double>() > rm_eval["before"]["accuracy"].get<double>());
  CHECK_FALSE(j["stages"][1].contains("eval"));  // sft writes none
  auto text = run_loom(home.path(), {"job", "show", id});
  INFO(text.out);
  char rl_line[160];
  std::snprintf(rl_line, sizeof rl_line, "    rl: mean reward %.3f -> %.3f (initial std %.3f), KL ",
                before["mean_reward"].get<double>(), after["mean_reward"].get<double>(),
                before["reward_std"].get<double>());
  const std::size_t at = text.out.find("  held-out eval (before -> after):\n");
  REQUIRE(at != std::string::npos);
  MESSAGE("loom job show:\n" << text.out.substr(at));
  CHECK(text.out.find(rl_line) != std::string::npos);
  CHECK(text.out.find("    rm: reward-model accuracy ") != std::string::npos);

  // An uninterrupted job of the same template ends with the same parameters, bitwise.
  auto ref = loom_json(home.path(), submit);
  REQUIRE(ref.contains("id"));
  json r = wait_done(home.path(), ref["id"].get<std::string>(), remaining(deadline + 90s));
  REQUIRE(r.value("state", "") == "succeeded");
  CHECK(r["stages"][3]["attempts"] == 1);
  CHECK(final_params_sha(j, "rm") == final_params_sha(r, "rm"));
  CHECK(final_params_sha(j, "rl") == final_params_sha(r, "rl"));
}
