// Cross-process: an `hpo` job through `loom up` (issue 15 item 7). The
// hpo-lr-tiny template searches 8 log-uniform learning rates (seed 11) for a
// byte-level 2-layer GPT on the licence texts Debian ships (the last 5% held
// out as the validation text). The reference is the full sweep run through
// the same services and trainers (the same job with one rung at R: every
// trial trained to R). ASHA must pick a config within 5% of the sweep's best
// validation loss while spending at most 40% of its steps; pruned trials'
// trainers take other trials; `loom job show` names the best config; a bad
// [hpo] section is refused at submit with the template's file:line.
#include "libs/files/files.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string templates_dir = LOOM_SOURCE_DIR "/templates";

// The licence texts in name order (local_search's corpus): train = the first
// 95%, held = the rest.
void write_corpus(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator("/usr/share/common-licenses"))
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string all;
  for (const auto& f : files) all += files::read_file(f.string()).value();
  const std::size_t cut = all.size() - all.size() / 20;
  REQUIRE(files::write_atomic(dir + "/train.txt", all.substr(0, cut)).ok());
  REQUIRE(files::write_atomic(dir + "/held.txt", all.substr(cut)).ok());
}

json events_of(const std::string& home, const std::string& id) { return loom_json(home, {"job", "logs", id})["events"]; }

// "trial 3 (...) on NODE, step 900: validation loss 2.4313, complete" -> trial -> loss, for `kind` verdicts.
std::map<int, double> trial_losses(const json& events, std::int64_t step) {
  std::map<int, double> out;
  const std::regex re("^trial ([0-9]+) .* step ([0-9]+): validation loss ([0-9.]+),");
  for (const auto& e : events) {
    std::smatch m;
    const std::string text = e["text"];
    if (e["kind"] == "hpo_trial" && std::regex_search(text, m, re) && std::stoll(m[2]) == step)
      out[std::stoi(m[1])] = std::stod(m[3]);
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("hpo-lr-tiny: ASHA on 3 trainers picks a learning rate within 5% of the sweep's best with at most 40% of its steps") {
  const auto t0 = std::chrono::steady_clock::now();
  temp_dir home, data;
  write_corpus(data.path());
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--trainers", "3", "--import-root", data.path()}, 60s).code == 0);
  const std::vector<std::string> base = {"job", "submit", "--templates", templates_dir, "--template", "hpo-lr-tiny",
                                         "--set", "text=" + data.path() + "/train.txt",
                                         "--set", "hpo.validation=" + data.path() + "/held.txt"};

  // The sweep: one rung at R, so every trial trains to R and is scored there.
  auto sweep_args = base;
  sweep_args.insert(sweep_args.end(), {"--set", "hpo.min_steps=900"});
  const std::string sweep_id = loom_json(home.path(), sweep_args).value("id", "");
  REQUIRE(!sweep_id.empty());
  const json sweep = wait_done(home.path(), sweep_id, 240s);
  REQUIRE(sweep.value("state", "") == "succeeded");
  const auto sweep_losses = trial_losses(events_of(home.path(), sweep_id), 900);
  REQUIRE(sweep_losses.size() >= 5);  // the largest rates may diverge (a loss spike fails them)
  double sweep_best = INFINITY;
  for (const auto& [t, l] : sweep_losses) sweep_best = std::min(sweep_best, l);
  CHECK(sweep["stages"][0]["step"] == 8 * 900);
  const double sweep_s = seconds_since(t0);

  // The search.
  const std::string id = loom_json(home.path(), base).value("id", "");
  REQUIRE(!id.empty());
  const json j = wait_done(home.path(), id, 240s);
  INFO(j.dump());
  REQUIRE(j.value("state", "") == "succeeded");
  const json& st = j["stages"][0];
  const std::string best_text = st.value("hpo_best", "");
  std::smatch m;
  REQUIRE(std::regex_search(best_text, m, std::regex("^best trial ([0-9]+) \\(optim.lr=([0-9.e-]+)\\)")));
  const int best = std::stoi(m[1]);
  const double loss = st["loss"].get<double>();
  const double spent = double(st["step"].get<std::uint64_t>()) / double(8 * 900);
  const double ratio = loss / sweep_best;
  MESSAGE("sweep best " << sweep_best << "; ASHA trial " << best << " (lr " << m[2] << ") " << loss << ", loss_ratio "
                        << ratio << ", steps_ratio " << spent << "; sweep " << sweep_s << " s, all "
                        << seconds_since(t0) << " s");
  CHECK(ratio <= 1.05);
  CHECK(spent <= 0.40);
  // Continued from its own snapshots at each promotion: the same loss as the sweep's straight run.
  REQUIRE(sweep_losses.count(best));
  CHECK(std::fabs(loss - sweep_losses.at(best)) < 1e-3);
  // The trainers trained what the scheduler granted: each trial's metrics log ends at its last step.
  std::uint64_t trained = 0;
  for (int t = 0; t < 8; ++t)
    trained += last_logged_step(j["out_dir"].get<std::string>() + "/search/trial-" + std::to_string(t) + "/metrics.jsonl");
  CHECK(trained == st["step"].get<std::uint64_t>());
  // The stage's result: the best trial's checkpoint at R, registered like any stage's.
  CHECK(st["checkpoint"].get<std::string>().find("/search/trial-" + std::to_string(best) + "/checkpoints/step-000900") !=
        std::string::npos);

  // Pruned trials freed their trainers at once: another trial was placed on the same node next.
  const json events = events_of(home.path(), id);
  int reused = 0;
  bool registered = false;
  std::map<std::string, bool> freed;  // node -> its last segment was pruned
  const std::regex stopped("^trial [0-9]+ .* on ([^,]+), step [0-9]+: .*stopped"), placed("^trial [0-9]+ .* on (.+)$");
  for (const auto& e : events) {
    const std::string text = e["text"];
    std::smatch n;
    if (e["kind"] == "hpo_trial" && std::regex_search(text, n, stopped)) freed[n[1]] = true;
    if (e["kind"] == "hpo_placed" && std::regex_search(text, n, placed) && freed[n[1]]) {
      ++reused;
      freed[n[1]] = false;
    }
    registered |= e["kind"] == "model_registered";
  }
  CHECK(reused >= 3);
  CHECK(registered);

  // `loom job show` names the best config.
  auto shown = run_loom(home.path(), {"job", "show", id});
  CHECK(shown.out.find("search (hpo): best trial " + std::to_string(best) + " (optim.lr=") != std::string::npos);
}

TEST_CASE("a bad [hpo] section is refused at submit naming the template's file and line") {
  temp_dir home, tmpl;
  auto text = files::read_file(templates_dir + "/hpo-lr-tiny.toml");
  REQUIRE(text.ok());
  std::string bad = *text;
  bad.replace(bad.find("eta = 3"), 7, "eta = 3\nbudget = 9");
  const int line = 1 + int(std::count(bad.begin(), bad.begin() + long(bad.find("budget")), '\n'));
  REQUIRE(files::write_atomic(tmpl.path() + "/hpo-bad.toml", bad).ok());
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--trainers", "1"}, 60s).code == 0);
  auto r = run_loom(home.path(), {"job", "submit", "--templates", tmpl.path(), "--template", "hpo-bad", "--set",
                                  "text=/usr/share/common-licenses/GPL-3"});
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("hpo-bad.toml:" + std::to_string(line) + ": hpo.budget is not a known key") != std::string::npos);
  auto inverted = run_loom(home.path(), {"job", "submit", "--templates", templates_dir, "--template", "hpo-lr-tiny",
                                         "--set", "text=/usr/share/common-licenses/GPL-3", "--set", "hpo.trials=0"});
  CHECK(inverted.code == 1);
  CHECK(inverted.err.find("hpo.trials must be an integer in [1, 10000]") != std::string::npos);
}
