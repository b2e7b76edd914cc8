// Cross-process: the pipeline-dpo-tiny template (pretrain -> SFT -> DPO) through
// `loom up`, with kill -9 of the trainer during the DPO stage: the job succeeds,
// the DPO stage ran more than once and resumed from its snapshot, its final
// parameters equal an uninterrupted job's bitwise, and its held-out preference
// accuracy rose (eval.json, before -> after). The stage switch (the last SFT
// step to the first DPO step, seen in the stages' metrics logs) is measured
// and printed.
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

long pid_of(const std::string& home, const std::string& service) {
  for (auto& s : loom_json(home, {"status"}).value("services", json::array()))
    if (s.value("name", "") == service && s.value("healthy", false)) return s.value("pid", 0L);
  return 0;
}

std::uint64_t last_logged_step(const std::string& metrics) {
  auto text = files::read_file(metrics);
  if (!text || text->empty()) return 0;
  const std::size_t end = text->rfind('\n', text->size() - 2);
  auto j = json::parse(text->substr(end == std::string::npos ? 0 : end + 1), nullptr, false);
  return j.is_object() ? j.value("step", std::uint64_t{0}) : 0;
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
  while (std::chrono::steady_clock::now() < deadline && last_logged_step(sft_log) < 20)
    std::this_thread::sleep_for(2ms);
  const auto sft_done = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline && last_logged_step(dpo_log) < 1)
    std::this_thread::sleep_for(2ms);
  const double switch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sft_done).count();
  MESSAGE("stage switch sft -> dpo: " << switch_s << " s (last sft step to first dpo step logged)");
  CHECK(switch_s < 60);

  // kill -9 once the DPO stage has logged step 12 (it snapshots every 10).
  while (std::chrono::steady_clock::now() < deadline && last_logged_step(dpo_log) < 12)
    std::this_thread::sleep_for(2ms);
  const long old = pid_of(home.path(), "trainer");
  REQUIRE(old > 0);
  REQUIRE(::kill(static_cast<pid_t>(old), SIGKILL) == 0);
  MESSAGE("killed the trainer at dpo step >= 12 (logged " << last_logged_step(dpo_log) << ")");

  json j;
  while (std::chrono::steady_clock::now() < deadline) {
    j = loom_json(home.path(), {"job", "show", id});
    const std::string st = j.value("state", "");
    if (st == "succeeded" || st == "failed" || st == "cancelled") break;
    std::this_thread::sleep_for(250ms);
  }
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
  // The resumed stage's log reads as one run: steps 1..30, each once.
  auto log = files::read_file(dpo_log);
  REQUIRE(log.ok());
  CHECK(std::count(log->begin(), log->end(), '\n') == 30);

  // An uninterrupted job of the same template ends with the same parameters, bitwise.
  auto ref = loom_json(home.path(), {"job", "submit", "--template", "pipeline-dpo-tiny", "--set",
                                     "text=/usr/share/common-licenses/GPL-3"});
  REQUIRE(ref.contains("id"));
  json r;
  while (std::chrono::steady_clock::now() < deadline + 60s) {
    r = loom_json(home.path(), {"job", "show", ref["id"].get<std::string>()});
    const std::string st = r.value("state", "");
    if (st == "succeeded" || st == "failed" || st == "cancelled") break;
    std::this_thread::sleep_for(250ms);
  }
  REQUIRE(r.value("state", "") == "succeeded");
  auto params = [](const json& job) {
    auto bytes = files::read_file(job["stages"][2]["checkpoint"].get<std::string>() + "/model.safetensors");
    REQUIRE(bytes.ok());
    return crypto::sha256_hex(*bytes);
  };
  CHECK(params(j) == params(r));
}
