// Cross-process: stages in child processes of their own (issue 30, item 2),
// through `loom up` with LOOM_STAGE_PROCESSES=1. The trainer service runs
// each stage in `loom-trainer stage-child` under a process_box (a cgroup v2
// or v1 with a memory limit and a CPU quota where the machine allows it, else
// setrlimit); a child that dies is reported with its cause (a job event
// stage_crashed, audited) and restarted from its latest snapshot, and the
// service keeps serving. An hpo trial's process scores itself at its rung;
// a gang member's relays its all-reduce through its trainer's group, and
// its death re-forms the group.
#include "libs/files/files.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// `loom up` with the trainers running stages in child processes; `extra_env` set around it.
void up_with_stage_processes(const std::string& home, const std::string& trainers,
                             std::vector<std::pair<std::string, std::string>> extra_env = {}) {
  extra_env.emplace_back("LOOM_STAGE_PROCESSES", "1");
  for (const auto& [k, v] : extra_env) ::setenv(k.c_str(), v.c_str(), 1);
  auto up = run_loom(home, {"up", "--trainers", trainers, "--import-root", "/usr/share/common-licenses"}, 60s);
  for (const auto& [k, v] : extra_env) ::unsetenv(k.c_str());
  REQUIRE(up.code == 0);
}

double median_ms(const std::string& metrics, std::uint64_t from, std::uint64_t to) {
  std::vector<double> v;
  auto text = files::read_file(metrics);
  REQUIRE(text.ok());
  for (std::size_t at = 0; at < text->size();) {
    std::size_t end = text->find('\n', at);
    if (end == std::string::npos) end = text->size();
    auto j = json::parse(text->substr(at, end - at), nullptr, false);
    if (j.is_object() && j.value("step", 0u) >= from && j.value("step", 0u) <= to) v.push_back(j.value("ms_per_step", 0.0));
    at = end + 1;
  }
  REQUIRE_FALSE(v.empty());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST_CASE("a stage's own process killed -9 is reported with its cause and resumes bitwise equal, the service untouched") {
  temp_dir home;
  up_guard guard{home.path()};
  up_with_stage_processes(home.path(), "1");
  // `loom status` says how this host runs stages.
  const json status = loom_json(home.path(), {"status"});
  REQUIRE(status["trainers"].size() == 1);
  CHECK(status["trainers"][0].value("isolation", "").starts_with("processes under "));
  MESSAGE("stages run in " << status["trainers"][0].value("isolation", ""));
  const std::vector<std::string> steps = {"--set", "pretrain.train.steps=150"};
  const std::string ref = submit_pipeline_test(home.path(), steps);
  json ref_done = wait_done(home.path(), ref);
  REQUIRE(ref_done["state"] == "succeeded");
  const auto ref_events = stage_events(home.path(), ref, "pretrain");
  REQUIRE(count_starting(ref_events, "stage_process: runs in process ") == 1);

  const long service = pid_of(home.path(), "trainer");
  REQUIRE(service > 0);
  const std::string id = submit_pipeline_test(home.path(), steps);
  const std::string metrics = loom_json(home.path(), {"job", "show", id})["out_dir"].get<std::string>() + "/pretrain/metrics.jsonl";
  REQUIRE(wait_logged_step(metrics, 30, std::chrono::steady_clock::now() + 120s, 5ms) >= 30);
  long child = 0;
  for (const auto& e : stage_events(home.path(), id, "pretrain"))
    if (e.starts_with("stage_process: runs in process ")) child = std::atol(e.c_str() + 31);
  REQUIRE(child > 0);
  REQUIRE(child != service);
  MESSAGE("stage process " << child << " of trainer " << service << "; killing it");
  REQUIRE(::kill(static_cast<pid_t>(child), SIGKILL) == 0);

  json done = wait_done(home.path(), id);
  REQUIRE(done["state"] == "succeeded");
  const auto all = stage_events(home.path(), id, "pretrain");
  INFO(json(all).dump(1));
  CHECK(count_starting(all, "stage_crashed: its process " + std::to_string(child) +
                                " killed by signal 9 (Killed); restarting from its latest snapshot") == 1);
  CHECK(count_starting(all, "stage_process: runs in process ") == 2);
  CHECK(final_params_sha(done, "pretrain") == final_params_sha(ref_done, "pretrain"));
  CHECK(final_params_sha(done, "sft") == final_params_sha(ref_done, "sft"));
  CHECK(pid_of(home.path(), "trainer") == service);  // the service itself never restarted
  auto trail = run_loom(home.path(), {"audit", "trail", id, "--json"}, 30s);
  REQUIRE(trail.code == 0);
  CHECK(trail.out.find("job.stage_crashed") != std::string::npos);
}

// An hpo search of one trial trained to one rung of 3000 steps on one trainer,
// snapshots every 200 steps: `loom job submit` arguments.
std::vector<std::string> small_search() {
  return {"job", "submit", "--template", "hpo-lr-tiny", "--set", "text=/usr/share/common-licenses/GPL-3",
          "--set", "hpo.validation=/usr/share/common-licenses/Apache-2.0", "--set", "hpo.trials=1",
          "--set", "hpo.min_steps=3000", "--set", "hpo.max_steps=3000", "--set", "train.steps=3000",
          "--set", "checkpoint.every_steps=200"};
}

// Each trial's verdict ("trial N (optim.lr=...) on NODE, step S: validation loss L, ...") in order.
std::vector<std::string> trial_verdicts(const std::string& home, const std::string& id) {
  std::vector<std::string> out;
  const json logs = loom_json(home, {"job", "logs", id});  // held: a range over a temporary's member dangles
  for (const auto& e : logs["events"])
    if (e["kind"] == "hpo_trial") out.push_back(e["text"].get<std::string>());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("an hpo trial's own process killed -9: the trial resumes from its snapshot and scores as if uninterrupted") {
  temp_dir home;
  up_guard guard{home.path()};
  up_with_stage_processes(home.path(), "1");
  const long service = pid_of(home.path(), "trainer");
  REQUIRE(service > 0);
  // The reference: the same search, uninterrupted.
  const std::string ref = loom_json(home.path(), small_search()).value("id", "");
  REQUIRE(!ref.empty());
  const json ref_done = wait_done(home.path(), ref);
  REQUIRE(ref_done["state"] == "succeeded");
  const auto ref_verdicts = trial_verdicts(home.path(), ref);
  REQUIRE(ref_verdicts.size() == 1);

  const std::string id = loom_json(home.path(), small_search()).value("id", "");
  REQUIRE(!id.empty());
  // The trial's process, named by its event; killed once it is past a snapshot.
  long child = 0;
  int trial = -1;
  const std::regex own("^trial ([0-9]+): runs in process ([0-9]+) under ");
  REQUIRE(eventually([&] {
    const json logs = loom_json(home.path(), {"job", "logs", id});
    for (const auto& e : logs["events"]) {
      std::smatch m;
      const std::string text = e["text"];
      if (e["kind"] == "stage_process" && std::regex_search(text, m, own)) {
        trial = std::stoi(m[1]);
        child = std::stol(m[2]);
        return true;
      }
    }
    return false;
  }, 120s, 100ms));
  REQUIRE(child != service);
  const std::string metrics = loom_json(home.path(), {"job", "show", id})["out_dir"].get<std::string>() +
                              "/search/trial-" + std::to_string(trial) + "/metrics.jsonl";
  const auto at = wait_logged_step(metrics, 300, std::chrono::steady_clock::now() + 120s, 2ms);
  REQUIRE(at >= 300);
  REQUIRE(at < 3000);  // still training: the kill lands mid-run
  MESSAGE("trial " << trial << "'s process " << child << " at step " << at << "; killing it");
  REQUIRE(::kill(static_cast<pid_t>(child), SIGKILL) == 0);

  const json done = wait_done(home.path(), id);
  INFO(done.dump());
  REQUIRE(done["state"] == "succeeded");
  int crashed = 0;
  const json logs = loom_json(home.path(), {"job", "logs", id});
  for (const auto& e : logs["events"])
    crashed += e["kind"] == "stage_crashed" &&
               e["text"].get<std::string>().starts_with("trial " + std::to_string(trial) + ": its process " +
                                                        std::to_string(child) + " killed by signal 9 (Killed); "
                                                        "restarting from its latest snapshot");
  CHECK(crashed == 1);
  // Resumed bitwise: the trial scored exactly as in the uninterrupted search, the same best.
  CHECK(trial_verdicts(home.path(), id) == ref_verdicts);
  CHECK(done["stages"][0]["loss"].get<double>() == ref_done["stages"][0]["loss"].get<double>());
  CHECK(final_params_sha(done, "search") == final_params_sha(ref_done, "search"));
  CHECK(pid_of(home.path(), "trainer") == service);  // the service itself never restarted
}

TEST_CASE("a gang member's own process killed -9: the group re-forms and ends bitwise equal, the services untouched") {
  temp_dir home;
  up_guard guard{home.path()};
  up_with_stage_processes(home.path(), "2");
  const long services[2] = {pid_of(home.path(), "trainer"), pid_of(home.path(), "trainer-2")};
  REQUIRE(services[0] > 0);
  REQUIRE(services[1] > 0);
  // Data-parallel pretrain on both trainers, each member in its own process,
  // its all-reduce relayed through its trainer's group.
  const std::vector<std::string> gang = {"--set", "pretrain.trainers=2", "--set", "train.grad_accum=2",
                                         "--set", "pretrain.train.steps=120"};
  const std::string ref = submit_pipeline_test(home.path(), gang);
  const json ref_done = wait_done(home.path(), ref);
  REQUIRE(ref_done["state"] == "succeeded");
  REQUIRE(ref_done["stages"][0]["members"].size() == 2);
  const std::regex own("\\(rank ([01]) of 2\\): runs in process ([0-9]+) under ");
  auto member_processes = [&](const std::string& id) {
    std::map<int, long> out;  // rank -> its latest process
    for (const auto& e : stage_events(home.path(), id, "pretrain")) {
      std::smatch m;
      if (e.starts_with("stage_process: ") && std::regex_search(e, m, own)) out[std::stoi(m[1])] = std::stol(m[2]);
    }
    return out;
  };
  CHECK(member_processes(ref).size() == 2);

  const std::string id = submit_pipeline_test(home.path(), gang);
  const std::string metrics = loom_json(home.path(), {"job", "show", id})["out_dir"].get<std::string>() + "/pretrain/metrics.jsonl";
  REQUIRE(wait_logged_step(metrics, 50, std::chrono::steady_clock::now() + 120s, 5ms) >= 50);
  long child = 0;
  REQUIRE(eventually([&] { return (child = member_processes(id).count(1) ? member_processes(id)[1] : 0) > 0; }, 60s, 100ms));
  REQUIRE(child != services[0]);
  REQUIRE(child != services[1]);
  MESSAGE("rank 1's process " << child << " at step >= " << last_logged_step(metrics) << "; killing it");
  REQUIRE(::kill(static_cast<pid_t>(child), SIGKILL) == 0);

  const json done = wait_done(home.path(), id);
  REQUIRE(done["state"] == "succeeded");
  const auto all = stage_events(home.path(), id, "pretrain");
  INFO(json(all).dump(1));
  int crashed = 0, regroups = 0;
  for (const auto& e : all) {
    crashed += e.starts_with("stage_crashed: ") &&
               e.find("(rank 1 of 2): its process " + std::to_string(child) + " killed by signal 9 (Killed); the group re-forms") !=
                   std::string::npos;
    regroups += e.starts_with("regroup: ");
  }
  CHECK(crashed == 1);
  CHECK(regroups >= 1);
  CHECK(done["stages"][0]["generation"].get<int>() >= 2);
  CHECK(final_params_sha(done, "pretrain") == final_params_sha(ref_done, "pretrain"));
  CHECK(final_params_sha(done, "sft") == final_params_sha(ref_done, "sft"));
  CHECK(pid_of(home.path(), "trainer") == services[0]);  // neither service restarted
  CHECK(pid_of(home.path(), "trainer-2") == services[1]);
}

TEST_CASE("two jobs on one host, one leaking without bound: its limit stops it, the cause is named, the other runs on") {
  temp_dir home;
  up_guard guard{home.path()};
  // job-000003 keeps 64 MiB more every step: its process meets its limit
  // (twice its estimate + 1 GiB) within seconds, three times, and the stage
  // fails. Beside the steady job-000001 runs first a well-behaved job-000002,
  // then the leaking one: the steady job's step times in the two windows are
  // what isolation is about.
  up_with_stage_processes(home.path(), "2", {{"LOOM_INJECT_LEAK", "job-000003:64"}});
  const std::string steady = submit_pipeline_test(home.path(), {"--set", "pretrain.train.steps=2000"});
  const std::string metrics =
      loom_json(home.path(), {"job", "show", steady})["out_dir"].get<std::string>() + "/pretrain/metrics.jsonl";
  REQUIRE(wait_logged_step(metrics, 20, std::chrono::steady_clock::now() + 120s, 5ms) >= 20);
  const std::uint64_t normal_from = last_logged_step(metrics);
  const std::string normal = submit_pipeline_test(home.path(), {"--set", "pretrain.train.steps=300"});
  REQUIRE(wait_done(home.path(), normal)["state"] == "succeeded");
  const std::uint64_t normal_to = last_logged_step(metrics);
  const std::string leaky = submit_pipeline_test(home.path(), {"--set", "pretrain.train.steps=400"});
  REQUIRE(leaky == "job-000003");
  const std::uint64_t leak_from = last_logged_step(metrics);
  json leaky_done = wait_done(home.path(), leaky);
  const std::uint64_t leak_to = last_logged_step(metrics);
  REQUIRE(leaky_done["state"] == "failed");
  const std::string why = leaky_done.value("message", "");
  INFO(why);
  const auto leak_events = stage_events(home.path(), leaky, "pretrain");
  INFO(json(leak_events).dump(1));
  CHECK(count_starting(leak_events, "stage_crashed: its process ") == 3);
  const bool by_kernel = why.find("killed by the kernel for memory at its limit of ") != std::string::npos;
  const bool by_rlimit = why.find("ran out of memory (an allocation failed under its limit)") != std::string::npos;
  CHECK((by_kernel || by_rlimit));
  CHECK(why.find("training crashed 3 times") != std::string::npos);
  bool boxed = false;
  for (const auto& e : leak_events)
    boxed = boxed || (e.starts_with("stage_process: runs in process ") &&
                      (e.find(" under cgroup v") != std::string::npos || e.find(" under setrlimit") != std::string::npos));
  CHECK(boxed);
  if (by_rlimit) MESSAGE("LOOM_TEST_SKIPPED: no cgroup here; the setrlimit fallback was checked instead");

  // The steady job runs on: 80 more steps after the leaking one's end (its
  // step time alone), never crashed; then it is cancelled (its remaining
  // steps would show nothing more).
  const std::uint64_t alone_to = std::min<std::uint64_t>(leak_to + 80, 2000);
  REQUIRE(wait_logged_step(metrics, alone_to, std::chrono::steady_clock::now() + 180s, 5ms) >= alone_to);
  const std::string steady_state = loom_json(home.path(), {"job", "show", steady}).value("state", "");
  CHECK((steady_state == "running" || steady_state == "succeeded"));
  CHECK(count_starting(stage_events(home.path(), steady, "pretrain"), "stage_crashed") == 0);
  (void)run_loom(home.path(), {"job", "cancel", steady});
  REQUIRE(normal_to >= normal_from + 20);
  REQUIRE(leak_to >= leak_from + 20);
  const double beside_normal = median_ms(metrics, normal_from + 5, normal_to);
  const double beside_leak = median_ms(metrics, leak_from + 5, leak_to);
  const double alone = alone_to >= leak_to + 40 ? median_ms(metrics, leak_to + 20, alone_to) : 0;
  MESSAGE("the steady job's median step: " << beside_normal << " ms beside a well-behaved job, " << beside_leak
                                           << " ms beside the leaking one ("
                                           << (beside_leak / beside_normal - 1) * 100 << "%), " << alone << " ms alone");
  // Measured on 2 cores: +3.4 % and +21 % in two runs — the leaking
  // process's page faults and its kernel's reclaim and OOM kills share the
  // cores outside its CPU quota. The bound catches a host brought to its
  // knees (a leak without a limit swaps or takes the machine down), not noise.
  CHECK(beside_leak < beside_normal * 1.5);
}
