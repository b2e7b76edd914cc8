// Watching a training job from a cross-process test: the pid of a running
// service, the last step a stage's metrics log holds, waiting for a step or
// for the job's end, a stage's final parameters' hash, submitting a
// pipeline-test job and reading a stage's events. Header-only (it
// brings doctest and nlohmann/json only to the tests that use it); tests only,
// one thread.
#pragma once

#include "tests/support/at_rest.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace loom::test {

// The pid `loom status` gives a healthy `service` of the deployment at `home`; 0 when none.
inline long pid_of(const std::string& home, const std::string& service) {
  for (auto& s : loom_json(home, {"status"}).value("services", nlohmann::json::array()))
    if (s.value("name", "") == service && s.value("healthy", false)) return s.value("pid", 0L);
  return 0;
}

// The step of the last line of a stage's metrics.jsonl (it moves every step;
// the scheduler hears of progress only once a second); 0 before the first.
inline std::uint64_t last_logged_step(const std::string& metrics) {
  auto text = files::read_file(metrics);
  if (!text || text->empty()) return 0;
  const std::size_t end = text->rfind('\n', text->size() - 2);
  auto j = nlohmann::json::parse(text->substr(end == std::string::npos ? 0 : end + 1), nullptr, false);
  return j.is_object() ? j.value("step", std::uint64_t{0}) : 0;
}

// The steps of every line of a stage's metrics.jsonl, in file order (0 for a
// line that is not a JSON object with a step).
inline std::vector<std::uint64_t> logged_steps(const std::string& metrics) {
  std::vector<std::uint64_t> steps;
  auto text = files::read_file(metrics);
  if (!text) return steps;
  for (std::size_t at = 0; at < text->size();) {
    std::size_t end = text->find('\n', at);
    if (end == std::string::npos) end = text->size();
    auto j = nlohmann::json::parse(text->substr(at, end - at), nullptr, false);
    steps.push_back(j.is_object() ? j.value("step", std::uint64_t{0}) : 0);
    at = end + 1;
  }
  return steps;
}

// 1, 2, ..., n: what logged_steps() reads for a run of n steps logged once each.
inline std::vector<std::uint64_t> steps_up_to(std::uint64_t n) {
  std::vector<std::uint64_t> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = i + 1;
  return v;
}

// Polls `metrics` every `poll` until it has logged `step` or `deadline`
// passes; returns the last step seen (below `step` on a timeout).
inline std::uint64_t wait_logged_step(const std::string& metrics, std::uint64_t step,
                                      std::chrono::steady_clock::time_point deadline,
                                      std::chrono::milliseconds poll = std::chrono::milliseconds(2)) {
  std::uint64_t at = 0;
  while (std::chrono::steady_clock::now() < deadline && (at = last_logged_step(metrics)) < step)
    std::this_thread::sleep_for(poll);
  return at;
}

// `loom job show ID` every `poll` until the job is succeeded, failed or
// cancelled (or `limit` passes): its last JSON. Each look is a `loom`
// process; a test that measures the job's speed looks less often.
inline nlohmann::json wait_done(const std::string& home, const std::string& id,
                                std::chrono::seconds limit = std::chrono::seconds(240),
                                std::chrono::milliseconds poll = std::chrono::milliseconds(250)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  nlohmann::json j;
  while (std::chrono::steady_clock::now() < deadline) {
    j = loom_json(home, {"job", "show", id});
    const std::string st = j.value("state", "");
    if (st == "succeeded" || st == "failed" || st == "cancelled") return j;
    std::this_thread::sleep_for(poll);
  }
  return j;
}

// sha256 of the model.safetensors (its plaintext: snapshots are sealed at
// rest) in the final checkpoint of `job`'s stage `stage` (a `loom job show
// --json` object), as its signed manifest lists it; fails the test when there is none.
inline std::string final_params_sha(const nlohmann::json& job, const std::string& stage) {
  for (const auto& s : job["stages"])
    if (s["name"] == stage) return listed_sha256(s["checkpoint"].get<std::string>(), "model.safetensors");
  FAIL("no stage " << stage);
  return "";
}

// `loom job submit --template pipeline-test` on the GPL-3 text Debian ships,
// one thread per stage, with `extra` options after: the job's id.
inline std::string submit_pipeline_test(const std::string& home, std::vector<std::string> extra) {
  std::vector<std::string> args = {"job", "submit", "--template", "pipeline-test", "--set",
                                   "text=/usr/share/common-licenses/GPL-3", "--set", "threads=1"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto j = loom_json(home, args);
  REQUIRE(j.contains("id"));
  return j["id"].get<std::string>();
}

// "kind: text" of each event of `stage` of job `id`, in order (`loom job logs`).
inline std::vector<std::string> stage_events(const std::string& home, const std::string& id, const std::string& stage) {
  std::vector<std::string> out;
  auto logs = loom_json(home, {"job", "logs", id});
  for (const auto& e : logs["events"])
    if (e["stage"] == stage) out.push_back(e["kind"].get<std::string>() + ": " + e["text"].get<std::string>());
  return out;
}

// How many of `v` start with `prefix`.
inline int count_starting(const std::vector<std::string>& v, const std::string& prefix) {
  int n = 0;
  for (const auto& s : v) n += s.starts_with(prefix);
  return n;
}

}  // namespace loom::test
