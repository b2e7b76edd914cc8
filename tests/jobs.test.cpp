// Cross-process: training jobs through `loom up` — the pipeline-test template
// (pretrain -> SFT) succeeds with the SFT stage starting from pretrain's final
// checkpoint; kill -9 of the trainer at steps from a fixed seed leaves the final
// parameters bitwise equal to an uninterrupted job; kill -9 of the scheduler
// loses and duplicates nothing; a pretrain stage on a gang of two trainer
// processes survives kill -9 of each member. The corpus is the GPL-3 text Debian ships
// (imported through ingest for the pipeline test, data.text for the others).
#include "libs/atrest/kek_store.hpp"
#include "libs/engine/bf16.hpp"
#include "libs/files/files.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

using namespace loom;
namespace fs = std::filesystem;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const char* corpus = "/usr/share/common-licenses/GPL-3";

// `data`: the job's data override (default the corpus file as data.text).
std::string submit(const std::string& home, std::vector<std::string> extra = {},
                   const std::string& data = std::string("text=") + corpus) {
  std::vector<std::string> args = {"job", "submit", "--template", "pipeline-test", "--set", data};
  args.insert(args.end(), extra.begin(), extra.end());
  auto j = loom_json(home, args);
  REQUIRE(j.contains("id"));
  CHECK((j["state"] == "running" || j["state"] == "queued"));  // queued until the trainer has registered
  return j["id"].get<std::string>();
}

json show(const std::string& home, const std::string& id) { return loom_json(home, {"job", "show", id}); }

// Kills the service by pid and waits for the watcher's replacement to answer.
void kill_and_wait(const std::string& home, const std::string& service) {
  const long old = pid_of(home, service);
  REQUIRE(old > 0);
  REQUIRE(::kill(static_cast<pid_t>(old), SIGKILL) == 0);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  long now = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    now = pid_of(home, service);
    if (now != 0 && now != old) break;
    std::this_thread::sleep_for(100ms);
  }
  REQUIRE(now != 0);
  REQUIRE(now != old);
}

}  // namespace

TEST_CASE("pipeline-test: pretrain then SFT from pretrain's final checkpoint, both succeed, loss falls") {
  temp_dir home;
  up_guard guard{home.path()};
  // The deployment's at-rest KEK is 40 days old (the rotation age is 30): the
  // trainer replaces it before its first stage, audited, and seals with the new one.
  REQUIRE(atrest::kek_store::open(home.path() + "/keys/atrest", {}, std::chrono::system_clock::now() - std::chrono::days(40))
              .ok());
  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  // The corpus goes in through ingest; the trainer fetches the dataset from it,
  // pretrains on its shards and generates the SFT records from its documents.
  auto imported = run_loom(home.path(), {"data", "import", corpus, "--dataset", "gpl"}, 120s);
  INFO(imported.out << imported.err);
  REQUIRE(imported.code == 0);
  const std::string id = submit(home.path(), {}, "dataset=gpl");
  auto watch = run_loom(home.path(), {"job", "watch", id}, 240s);
  INFO(watch.out << watch.err);
  CHECK(watch.code == 0);
  json j = show(home.path(), id);
  REQUIRE(j["state"] == "succeeded");
  REQUIRE(j["stages"].size() == 2);
  const json& pre = j["stages"][0];
  const json& sft = j["stages"][1];
  CHECK(pre["state"] == "succeeded");
  CHECK(sft["state"] == "succeeded");
  CHECK(pre["step"] == 30);
  CHECK(sft["step"] == 20);
  // Both show the rate they trained at, the short SFT stage too (it may end between two polls).
  CHECK(pre["tokens_per_s"].get<double>() > 0);
  CHECK(sft["tokens_per_s"].get<double>() > 0);
  // The template says precision = "auto": bf16 where oneDNN multiplies it natively here, else fp32 —
  // shown per stage, and the job's events say which and why.
  const std::string machine = engine::probe_bf16().native ? "bf16" : "fp32";
  CHECK(pre["precision"] == machine);
  CHECK(sft["precision"] == machine);
  {
    auto events = loom_json(home.path(), {"job", "logs", id});
    int said = 0;
    for (const auto& e : events["events"])
      said += e["kind"] == "precision" && e["text"].get<std::string>().rfind(machine + " (auto", 0) == 0;
    CHECK(said == 2);  // pretrain and sft
    auto text = run_loom(home.path(), {"job", "show", id});
    CHECK(text.out.find("precision") != std::string::npos);
  }
  MESSAGE("pretrain loss " << pre["first_loss"] << " -> " << pre["loss"] << ", sft loss " << sft["first_loss"]
                           << " -> " << sft["loss"]);
  CHECK(pre["loss"].get<double>() < pre["first_loss"].get<double>() - 1.0);  // ln(50257) = 10.8 at the start
  const std::string pre_final = pre["checkpoint"].get<std::string>();
  CHECK(pre_final.ends_with("/pretrain/checkpoints/step-000030"));
  // Sealed at rest under KEK version 2 (bytes 12..16 of the header), the old one kept for what it sealed.
  {
    CHECK(fs::exists(home.path() + "/keys/atrest/kek-000001.key"));
    CHECK(fs::exists(home.path() + "/keys/atrest/kek-000002.key"));
    const std::string model = files::read_file(pre_final + "/model.safetensors").value();
    REQUIRE(model.size() > 16);
    CHECK(model.compare(0, 8, "LOOMSEAL") == 0);
    CHECK(model.substr(12, 4) == std::string("\0\0\0\2", 4));
  }

  // The SFT stage was queued from that checkpoint and its trainer loaded it.
  auto logs = loom_json(home.path(), {"job", "logs", id});
  bool queued_from_pre = false;
  for (const auto& e : logs["events"])
    if (e["stage"] == "sft" && e["kind"] == "queued") queued_from_pre = e["text"].get<std::string>().find(pre_final) != std::string::npos;
  CHECK(queued_from_pre);
  auto trainer_log = files::read_file(home.path() + "/logs/trainer.log");
  REQUIRE(trainer_log.ok());
  CHECK(trainer_log->find("initialised from " + pre_final) != std::string::npos);
  CHECK(trainer_log->find("fetched dataset gpl from ingest") != std::string::npos);

  // The trainer's step metrics are on its /metrics: 30 + 20 steps.
  std::string metrics_url;
  for (auto& sv : loom_json(home.path(), {"status"}).value("services", json::array()))
    if (sv.value("name", "") == "trainer") metrics_url = sv.value("metrics", "");
  if (metrics_url.rfind("http://", 0) == 0) metrics_url = metrics_url.substr(7);
  const std::string host_port = metrics_url.substr(0, metrics_url.find('/'));
  REQUIRE(host_port.find(':') != std::string::npos);
  const std::string text = http_get(host_port, "/metrics");
  CHECK(text.find("loom_trainer_training_steps_total 50") != std::string::npos);
  CHECK(text.find("loom_trainer_training_step 20") != std::string::npos);
  CHECK(text.find("loom_trainer_training_loss ") != std::string::npos);

  // The list shows it once; a second submit with the same request id is the same job.
  auto first = loom_json(home.path(), {"job", "submit", "--template", "pipeline-test", "--set",
                                       std::string("text=") + corpus, "--request-id", "fixed-id-1"});
  auto again = loom_json(home.path(), {"job", "submit", "--template", "pipeline-test", "--set",
                                       std::string("text=") + corpus, "--request-id", "fixed-id-1"});
  CHECK(first["id"] == again["id"]);
  CHECK(again["existed"] == true);
  CHECK(loom_json(home.path(), {"job", "list"})["jobs"].size() == 2);
  CHECK(run_loom(home.path(), {"job", "cancel", first["id"].get<std::string>()}).code == 0);
  CHECK(wait_done(home.path(), first["id"].get<std::string>(), 30s)["state"] == "cancelled");

  // The audit trail shows the job's life from submit to completion.
  std::map<std::string, int> actions;
  std::string last_state;
  for (int i = 0; i < 50; ++i) {
    actions.clear();
    auto trail = loom_json(home.path(), {"audit", "trail", id});
    for (const auto& e : trail.value("events", json::array())) {
      ++actions[e.value("action", "")];
      CHECK(e["job_id"] == id);
      if (e.contains("payload") && e["payload"].is_object() && e["payload"].contains("job_state"))
        last_state = e["payload"]["job_state"].get<std::string>();
    }
    if (actions["job.stage_succeeded"] == 2) break;
    std::this_thread::sleep_for(200ms);
  }
  CHECK(actions["loom.v1.SubmitJobRequest"] == 1);
  CHECK(actions["job.placed"] >= 2);
  CHECK(actions["job.stage_switch"] == 1);
  CHECK(actions["job.stage_succeeded"] == 2);
  CHECK(last_state == "succeeded");
  auto cancelled = loom_json(home.path(), {"audit", "trail", first["id"].get<std::string>()});
  bool saw_cancel = false;
  for (const auto& e : cancelled.value("events", json::array()))
    saw_cancel |= e.value("action", "") == "loom.v1.CancelJobRequest" && e.value("decision", "") == "allow";
  CHECK(saw_cancel);
  auto tail = run_loom(home.path(), {"audit", "tail", "--lines", "2000", "--json"});
  CHECK(tail.out.find("\"keys.atrest.rotate\"") != std::string::npos);
  auto verify = run_loom(home.path(), {"audit", "verify"});
  INFO(verify.out);
  CHECK(verify.code == 0);
}

TEST_CASE("kill -9 of the trainer at 3 steps from seed 7: the job succeeds, bitwise equal to an uninterrupted one") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  const std::vector<std::string> longer = {"--set", "pretrain.train.steps=60"};
  const std::string ref = submit(home.path(), longer);
  json ref_done = wait_done(home.path(), ref);
  REQUIRE(ref_done["state"] == "succeeded");

  std::mt19937 rng(7);
  std::vector<std::uint64_t> kills;
  while (kills.size() < 3) {
    std::uint64_t k = 5 + rng() % 50;
    if (std::find(kills.begin(), kills.end(), k) == kills.end()) kills.push_back(k);
  }
  std::sort(kills.begin(), kills.end());
  const std::string id = submit(home.path(), longer);
  // The stage's metrics log moves every step (the scheduler hears of progress
  // once a second, ~16 steps here), so kills land at their drawn steps.
  const std::string metrics = show(home.path(), id)["out_dir"].get<std::string>() + "/pretrain/metrics.jsonl";
  int killed = 0;
  for (std::uint64_t k : kills) {
    const std::uint64_t at = wait_logged_step(metrics, k, std::chrono::steady_clock::now() + 120s);
    if (show(home.path(), id)["stages"][0]["state"] != "running") break;
    kill_and_wait(home.path(), "trainer");
    MESSAGE("killed the trainer at pretrain step >= " << k << " (logged " << at << ")");
    ++killed;
  }
  CHECK(killed == 3);
  json done = wait_done(home.path(), id);
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["stages"][0]["attempts"].get<int>() >= 1 + killed);
  CHECK(final_params_sha(done, "pretrain") == final_params_sha(ref_done, "pretrain"));
  CHECK(final_params_sha(done, "sft") == final_params_sha(ref_done, "sft"));
}

TEST_CASE("a pretrain stage on a gang of two trainers survives kill -9 of each member, bitwise equal to an uninterrupted gang") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--trainers", "2", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  // Data-parallel pretrain on two trainer processes (one micro-batch each,
  // one thread each: the two share this machine's cores), then SFT on one.
  const std::vector<std::string> gang = {"--set", "pretrain.trainers=2", "--set", "train.grad_accum=2",
                                         "--set", "threads=1",          "--set", "pretrain.train.steps=80"};
  const std::string ref = submit(home.path(), gang);
  json ref_done = wait_done(home.path(), ref);
  REQUIRE(ref_done["state"] == "succeeded");
  const json& pre = ref_done["stages"][0];
  CHECK(pre["members"].size() == 2);
  CHECK(pre["min_trainers"] == 2);
  CHECK(ref_done["stages"][1]["members"].size() == 1);
  CHECK(pre["loss"].get<double>() < pre["first_loss"].get<double>());

  const std::string id = submit(home.path(), gang);
  const std::string metrics = show(home.path(), id)["out_dir"].get<std::string>() + "/pretrain/metrics.jsonl";
  // Rank 1's process at step >= 23, then rank 0's at step >= 51 (rank 0 writes the log).
  int killed = 0;
  for (auto [step, rank] : {std::pair<std::uint64_t, int>{23, 1}, {51, 0}}) {
    wait_logged_step(metrics, step, std::chrono::steady_clock::now() + 120s);
    json now = show(home.path(), id);
    if (now["stages"][0]["state"] != "running") break;
    const std::string node = now["stages"][0]["members"][rank].get<std::string>();
    const std::string service = node.substr(0, node.find('@'));  // trainer or trainer-2
    kill_and_wait(home.path(), service);
    MESSAGE("killed " << service << " (rank " << rank << ") at pretrain step >= " << step);
    ++killed;
  }
  CHECK(killed == 2);
  json done = wait_done(home.path(), id);
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["stages"][0]["generation"].get<int>() >= 3);  // re-formed after each restart
  auto logs = loom_json(home.path(), {"job", "logs", id});
  int regroups = 0;
  for (const auto& e : logs["events"]) regroups += e["kind"] == "regroup";
  INFO(logs.dump());
  CHECK(regroups >= 2);
  CHECK(final_params_sha(done, "pretrain") == final_params_sha(ref_done, "pretrain"));
  CHECK(final_params_sha(done, "sft") == final_params_sha(ref_done, "sft"));
}

TEST_CASE("kill -9 of the scheduler mid-job: the job succeeds and no job is lost or duplicated") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  const std::string id = submit(home.path(), {"--set", "pretrain.train.steps=60", "--request-id", "sched-kill-1"});
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < deadline && show(home.path(), id)["stages"][0]["step"].get<int>() < 10)
    std::this_thread::sleep_for(100ms);
  kill_and_wait(home.path(), "scheduler");
  // The restarted scheduler re-attaches the running stage; a retried submit (the same
  // request: same id, same body) is the same job.
  auto again = loom_json(home.path(), {"job", "submit", "--template", "pipeline-test", "--set",
                                       std::string("text=") + corpus, "--set", "pretrain.train.steps=60",
                                       "--request-id", "sched-kill-1"});
  CHECK(again["id"] == id);
  CHECK(again["existed"] == true);
  json done = wait_done(home.path(), id);
  CHECK(done["state"] == "succeeded");
  auto list = loom_json(home.path(), {"job", "list"});
  CHECK(list["jobs"].size() == 1);
  auto logs = loom_json(home.path(), {"job", "logs", id});
  int placed = 0, reattached = 0;
  for (const auto& e : logs["events"]) {
    placed += e["kind"] == "placed";
    reattached += e["kind"] == "reattached";
  }
  MESSAGE(logs.dump());
  CHECK(reattached == 1);
  CHECK(placed == 2);  // pretrain once, sft once: the restart placed nothing twice
}

TEST_CASE("a high-priority job preempts a running low-priority one, which checkpoints, waits and resumes bitwise equal") {
  temp_dir home;
  up_guard guard{home.path()};
  // A one-second minimum runtime (default 60 s) so the test need not wait a minute.
  ::setenv("LOOM_SCHEDULER_MIN_RUNTIME_S", "1", 1);
  auto up = run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s);
  ::unsetenv("LOOM_SCHEDULER_MIN_RUNTIME_S");
  REQUIRE(up.code == 0);
  const std::vector<std::string> low = {"--set", "pretrain.train.steps=150", "--priority", "low"};
  const std::string ref = submit(home.path(), low);
  json ref_done = wait_done(home.path(), ref);
  REQUIRE(ref_done["state"] == "succeeded");

  const std::string victim = submit(home.path(), low);
  const std::string metrics = show(home.path(), victim)["out_dir"].get<std::string>() + "/pretrain/metrics.jsonl";
  wait_logged_step(metrics, 40, std::chrono::steady_clock::now() + 120s, 5ms);
  REQUIRE(last_logged_step(metrics) >= 40);
  const std::string urgent = submit(home.path(), {"--priority", "high"});
  json urgent_done = wait_done(home.path(), urgent);
  CHECK(urgent_done["state"] == "succeeded");
  // The urgent job ran to its end while the victim waited, its pretrain unfinished.
  json mid = show(home.path(), victim);
  CHECK(mid["stages"][0]["state"] != "succeeded");

  json done = wait_done(home.path(), victim);
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["stages"][0]["attempts"].get<int>() == 2);
  auto logs = loom_json(home.path(), {"job", "logs", victim});
  std::vector<std::string> kinds;
  for (const auto& e : logs["events"])
    if (e["stage"] == "pretrain") kinds.push_back(e["kind"].get<std::string>() + ": " + e["text"].get<std::string>());
  int preempted = 0;
  for (const auto& k : kinds) preempted += k.starts_with("requeued: preempted for a higher-priority job");
  INFO(logs.dump());
  CHECK(preempted == 1);
  // Preempted, it went back to the queue from a checkpoint: the same numbers as never interrupted.
  CHECK(final_params_sha(done, "pretrain") == final_params_sha(ref_done, "pretrain"));
  CHECK(final_params_sha(done, "sft") == final_params_sha(ref_done, "sft"));
  CHECK(loom_json(home.path(), {"job", "list"})["jobs"].size() == 3);
}

TEST_CASE("bad submits: unknown template, invalid override, missing dataset, a viewer's token: clear errors, exit codes, no job") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  auto has = [](const run_result& r, const std::string& what) { return r.err.find(what) != std::string::npos; };

  auto unknown = run_loom(home.path(), {"job", "submit", "--template", "no-such-template"});
  CHECK(unknown.code == 1);
  CHECK(has(unknown, "no template no-such-template"));

  auto section = run_loom(home.path(), {"job", "submit", "--template", "pipeline-test", "--set", "nosuch.key=1"});
  INFO(section.err);
  CHECK(section.code == 1);
  CHECK(has(section, "nosuch"));

  auto stage = run_loom(home.path(), {"job", "submit", "--template", "pipeline-test", "--set", "dpo.train.steps=5"});
  INFO(stage.err);
  CHECK(stage.code == 1);
  CHECK(has(stage, "dpo"));

  auto missing = run_loom(home.path(), {"job", "submit", "--template", "pipeline-test", "--set", "dataset=nope"});
  CHECK(missing.code == 1);
  CHECK(has(missing, "ingest has no dataset nope"));
  // (pretrain needs a source of its own: every stage is validated at submit)
  auto missing_stage = run_loom(home.path(), {"job", "submit", "--template", "pipeline-test", "--set",
                                              std::string("pretrain.text=") + corpus, "--set", "sft.data.dataset=nope"});
  CHECK(missing_stage.code == 1);
  CHECK(has(missing_stage, "sft.data.dataset=nope"));

  auto viewer = run_loom(home.path(), {"token", "issue", "--role", "viewer", "--zones", "local", "--json"});
  REQUIRE(viewer.code == 0);
  const std::string tok = json::parse(viewer.out)["token"].get<std::string>();
  auto denied = run_loom(home.path(), {"job", "submit", "--template", "pipeline-test", "--set",
                                       std::string("text=") + corpus, "--token", tok});
  CHECK(denied.code == 3);
  CHECK(has(denied, "permission"));
  CHECK(run_loom(home.path(), {"job", "list", "--token", tok}).code == 0);  // a viewer may look

  // Nothing was half-created: no job, no job directory.
  CHECK(loom_json(home.path(), {"job", "list"})["jobs"].empty());
  std::error_code ec;
  CHECK((!std::filesystem::exists(home.path() + "/jobs", ec) || std::filesystem::is_empty(home.path() + "/jobs", ec)));
}
