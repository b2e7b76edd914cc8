// `loom-trainer train` / `--resume` / `sample` as a user runs them: kill -9 at
// steps drawn from a fixed seed and resume until done, bitwise equal to an
// uninterrupted run; five kinds of snapshot corruption refused by name with the
// previous snapshot used; sampling from the result.
// The model is small (L2 H2 C64, GPT-2 vocabulary, B4 T32) so 300 steps take
// seconds; the data is the GPL-3 text every Debian machine has.
#include "tests/support/at_rest.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/scoped_env.hpp"
#include "libs/engine/bf16.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace loom;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

const char* corpus = "/usr/share/common-licenses/GPL-3";

std::string write_config(const std::string& dir, int steps, const std::string& precision = "fp32") {
  const std::string path = dir + "/run.toml";
  std::ofstream(path) << "[model]\nlayers = 2\nheads = 2\nchannels = 64\nmax_seq_len = 32\n"
                         "vocab = 50257\npadded_vocab = 50304\n"
                         "[data]\ntext = \"" << corpus << "\"\n"
                         "[train]\nbatch = 4\nseq_len = 32\nsteps = " << steps << "\nseed = 42\nthreads = 2\n"
                         "precision = \"" << precision << "\"\n"
                         "[optim]\nlr = 3e-3\nmin_lr = 3e-4\nwarmup_steps = 10\n"
                         "[checkpoint]\nevery_steps = 10\nkeep = 3\n";
  return path;
}

// The metrics lines without their timing fields.
std::vector<std::string> loss_log(const std::string& out) {
  std::ifstream in(out + "/metrics.jsonl");
  std::vector<std::string> v;
  for (std::string line; std::getline(in, line);) v.push_back(line.substr(0, line.find(",\"tokens_per_s\"")));
  return v;
}

// Completed steps according to the metrics log (0 when there is none yet).
std::uint64_t logged_steps(const std::string& out) {
  auto lines = loss_log(out);
  if (lines.empty()) return 0;
  auto j = nlohmann::json::parse(lines.back() + "}", nullptr, false);
  return j.is_object() ? j.value("step", std::uint64_t{0}) : 0;
}

// Starts `argv` with output to `log`; returns the pid.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

struct child_guard {  // kills the child by pid if a check fails early
  pid_t pid = -1;
  ~child_guard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

nlohmann::json train_json(const std::vector<std::string>& args) {
  auto r = test::run(args, 300s);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

// Trains `cfg` to `steps` uninterrupted, then again with kill -9 at `kills`
// steps drawn from seed 2026 (each resumed with --resume): the losses and the
// final parameters must be bitwise equal. Returns the reference's summary.
nlohmann::json kill_and_resume(const std::string& dir, const std::string& cfg, std::uint64_t steps, std::size_t kills_wanted) {
  const std::string home = dir + "/home";
  const std::string trainer = test::bin("loom-trainer");
  auto ref = train_json({trainer, "train", "--config", cfg, "--out", dir + "/ref", "--data-dir", home,
                         "--quiet", "--json"});
  CHECK(ref["steps"] == steps);
  REQUIRE(loss_log(dir + "/ref").size() == steps);

  // Kill points: distinct steps in [5, steps - 5] from a fixed seed, in order.
  std::mt19937 rng(2026);
  std::vector<std::uint64_t> kills;
  while (kills.size() < kills_wanted) {
    std::uint64_t k = 5 + rng() % (steps - 9);
    if (std::find(kills.begin(), kills.end(), k) == kills.end()) kills.push_back(k);
  }
  std::sort(kills.begin(), kills.end());

  const std::string out = dir + "/killed";
  const std::string log = dir + "/killed.log";
  std::size_t killed = 0;
  for (std::uint64_t k : kills) {
    if (logged_steps(out) >= k) continue;  // already past it (overshoot of the previous kill)
    std::vector<std::string> argv = {trainer, "train", "--config", cfg, "--out", out, "--data-dir", home, "--quiet"};
    if (fs::exists(out + "/checkpoints")) argv.push_back("--resume");
    child_guard child{spawn(argv, log)};
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (logged_steps(out) < k && std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(child.pid, nullptr, WNOHANG) == child.pid) {
        child.pid = -1;
        break;
      }
      std::this_thread::sleep_for(1ms);
    }
    REQUIRE(child.pid > 0);  // still running at its kill point
    ::kill(child.pid, SIGKILL);
    int status = 0;
    ::waitpid(child.pid, &status, 0);
    child.pid = -1;
    CHECK(WIFSIGNALED(status));
    MESSAGE("killed at step " << logged_steps(out) << " (drawn " << k << ")");
    ++killed;
  }
  CHECK(killed + 1 >= kills_wanted);
  auto fin = train_json({trainer, "train", "--config", cfg, "--out", out, "--data-dir", home, "--resume", "--json"});
  CHECK(fin["steps"] == steps);
  CHECK(fin["first_step"].get<int>() > 0);
  CHECK(fin["precision"] == ref["precision"]);
  CHECK(fin["params_sha256"] == ref["params_sha256"]);
  CHECK(loss_log(out) == loss_log(dir + "/ref"));
  return ref;
}

}  // namespace

TEST_CASE("kill -9 at 6 steps drawn from seed 2026, then --resume: losses and final parameters bitwise equal") {
  test::temp_dir tmp;
  auto ref = kill_and_resume(tmp.path(), write_config(tmp.path(), 300), 300, 6);
  CHECK(ref["precision"] == "fp32");
}

TEST_CASE("a bf16 run killed with -9 at 4 steps resumes bitwise, and its snapshots say bf16") {
  if (!engine::probe_bf16().native) {
    MESSAGE("LOOM_TEST_SKIPPED: " << engine::probe_bf16().why);
    return;
  }
  test::temp_dir tmp;
  auto ref = kill_and_resume(tmp.path(), write_config(tmp.path(), 160, "bf16"), 160, 4);
  CHECK(ref["precision"] == "bf16");
  // The snapshot says which precision its steps ran in (trainer_state.json, under the signed manifest).
  auto j = nlohmann::json::parse(
      test::plain_file(tmp.path() + "/ref/checkpoints/step-000160/trainer_state.json", tmp.path() + "/home"), nullptr,
      false);
  CHECK(j.value("precision", "") == "bf16");
}

TEST_CASE("a bf16 snapshot resumed where oneDNN has no native bf16 continues in fp32 and says so, never a failure") {
  if (!engine::probe_bf16().native) {
    MESSAGE("LOOM_TEST_SKIPPED: " << engine::probe_bf16().why << " (the bf16 snapshot cannot be made here)");
    return;
  }
  test::temp_dir tmp;
  const std::string cfg = write_config(tmp.path(), 200, "bf16");
  const std::string home = tmp.path() + "/home", out = tmp.path() + "/run";
  const std::string trainer = test::bin("loom-trainer");
  {  // bf16 until a snapshot exists, then kill -9 (a --set of the step count would be another run)
    child_guard child{spawn({trainer, "train", "--config", cfg, "--out", out, "--data-dir", home}, tmp.path() + "/first.log")};
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (!fs::exists(out + "/checkpoints/step-000010/MANIFEST.json") && std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(child.pid, nullptr, WNOHANG) == child.pid) {
        child.pid = -1;
        break;
      }
      std::this_thread::sleep_for(1ms);
    }
    REQUIRE(child.pid > 0);
    ::kill(child.pid, SIGKILL);
    ::waitpid(child.pid, nullptr, 0);
    child.pid = -1;
  }
  std::ifstream first_log(tmp.path() + "/first.log");
  std::stringstream first;
  first << first_log.rdbuf();
  CHECK(first.str().find("precision: bf16") != std::string::npos);
  // The same machine with oneDNN capped below AVX512-BF16: a machine kind without bf16.
  auto again = test::run({"/usr/bin/env", "DNNL_MAX_CPU_ISA=AVX512_CORE", trainer, "train", "--config", cfg, "--out",
                          out, "--data-dir", home, "--resume", "--json"}, 300s);
  INFO(again.err);
  REQUIRE(again.code == 0);
  auto j = nlohmann::json::parse(again.out);
  CHECK(j["precision"] == "fp32");
  CHECK(j["first_step"].get<int>() >= 10);
  CHECK(j["steps"] == 200);
  CHECK(again.err.find("precision: fp32 (bf16 trains in fp32") != std::string::npos);
  CHECK(again.err.find(" was trained in bf16; this machine continues in fp32") != std::string::npos);
  // Its own snapshots now say fp32.
  CHECK(nlohmann::json::parse(test::plain_file(out + "/checkpoints/step-000200/trainer_state.json", home), nullptr,
                              false)
            .value("precision", "") == "fp32");
}

TEST_CASE("a corrupt snapshot is refused with its file and hashes named and the previous one is used") {
  // Plain snapshots, whose bytes this test edits in place (a sealed file's
  // edits fail its tags: libs/ckpt/sealed_snapshot.test.cpp, and the sealed
  // case below).
  test::scoped_env plain("LOOM_AT_REST", "off");
  test::temp_dir tmp;
  const std::string cfg = write_config(tmp.path(), 30);
  const std::string home = tmp.path() + "/home";
  const std::string trainer = test::bin("loom-trainer");
  const std::string base = tmp.path() + "/base";
  auto ref = train_json({trainer, "train", "--config", cfg, "--out", base, "--data-dir", home, "--quiet", "--json"});
  REQUIRE(fs::exists(base + "/checkpoints/step-000030"));

  struct damage {
    std::string name, file, expect;
    std::function<void(const std::string&)> apply;
  };
  auto flip = [](const std::string& p, std::streamoff at) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    char c = 0;
    f.get(c);
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x01));
  };
  std::vector<damage> cases = {
      {"flipped byte", "model.safetensors", "sha256", [&](const std::string& d) { flip(d + "/model.safetensors", 4096); }},
      {"truncation", "optimizer.safetensors", "optimizer.safetensors",
       [](const std::string& d) { fs::resize_file(d + "/optimizer.safetensors", fs::file_size(d + "/optimizer.safetensors") / 2); }},
      {"edited manifest", "MANIFEST.json", "MANIFEST.json",
       [](const std::string& d) {
         std::ifstream in(d + "/MANIFEST.json");
         std::stringstream ss;
         ss << in.rdbuf();
         std::string m = ss.str();
         auto at = m.find("\"bytes\"");
         REQUIRE(at != std::string::npos);
         m.insert(at + 8, "1");  // a different size for the first file; the signature no longer matches
         std::ofstream(d + "/MANIFEST.json", std::ios::trunc) << m;
       }},
      {"edited safetensors header", "model.safetensors", "model.safetensors",
       [&](const std::string& d) {
         std::fstream f(d + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
         f.seekg(8);
         std::string head(200, '\0');
         f.read(head.data(), 200);
         auto at = head.find("F32");
         REQUIRE(at != std::string::npos);
         f.seekp(8 + static_cast<std::streamoff>(at));
         f.write("I32", 3);
       }},
      {"missing file", "trainer_state.json", "trainer_state.json",
       [](const std::string& d) { fs::remove(d + "/trainer_state.json"); }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const std::string out = tmp.path() + "/case-" + std::to_string(&c - cases.data());
    fs::copy(base, out, fs::copy_options::recursive);
    c.apply(out + "/checkpoints/step-000030");
    // Same config, 30 steps: resumes from step 20 and trains 21..30 again.
    auto r = test::run({trainer, "train", "--config", cfg, "--out", out, "--data-dir", home, "--resume", "--json"}, 300s);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.find("step-000030") != std::string::npos);
    CHECK(r.err.find(c.file) != std::string::npos);
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK(r.err.find("resumed from " + out + "/checkpoints/step-000020") != std::string::npos);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["first_step"] == 20);
    CHECK(j["params_sha256"] == ref["params_sha256"]);
    CHECK(fs::exists(out + "/checkpoints/refused/step-000030"));
  }
  // sample reads the snapshot it names and refuses a corrupt one.
  auto s = test::run({trainer, "sample", "--checkpoint", base + "/checkpoints", "--prompt", "This License",
                      "--max-tokens", "8", "--data-dir", home, "--json"});
  INFO(s.err);
  REQUIRE(s.code == 0);
  auto sj = nlohmann::json::parse(s.out);
  CHECK(sj["step"] == 30);
  CHECK(sj["tokens"].size() <= 8);
  auto again = test::run({trainer, "sample", "--checkpoint", base + "/checkpoints", "--prompt", "This License",
                          "--max-tokens", "8", "--data-dir", home, "--json"});
  CHECK(again.out == s.out);  // same seed, same text
  flip(base + "/checkpoints/step-000030/model.safetensors", 4096);
  auto bad = test::run({trainer, "sample", "--checkpoint", base + "/checkpoints/step-000030", "--prompt", "x",
                        "--data-dir", home});
  CHECK(bad.code == 1);
  CHECK(bad.err.find("model.safetensors") != std::string::npos);
}

TEST_CASE("train refuses bad configs and usage with exit code 2 or 1 and a message naming the problem") {
  test::temp_dir tmp;
  const std::string trainer = test::bin("loom-trainer");
  auto r = test::run({trainer, "train"});
  CHECK(r.code == 2);
  CHECK(r.err.find("--config") != std::string::npos);
  const std::string cfg = write_config(tmp.path(), 10);
  r = test::run({trainer, "train", "--config", cfg, "--set", "train.bogus=1", "--out", tmp.path() + "/o"});
  CHECK(r.code == 1);
  CHECK(r.err.find("train.bogus is not a known key") != std::string::npos);
  r = test::run({trainer, "train", "--config", tmp.path() + "/missing.toml"});
  CHECK(r.code == 1);
  CHECK(r.err.find("missing.toml") != std::string::npos);
  r = test::run({trainer, "train", "--config", cfg});
  CHECK(r.code == 1);
  CHECK(r.err.find("output.dir") != std::string::npos);
  r = test::run({trainer, "sample", "--checkpoint", tmp.path() + "/nothing", "--prompt", "x", "--data-dir",
                 tmp.path() + "/home"});
  CHECK(r.code == 1);
  CHECK(r.err.find(tmp.path() + "/nothing") != std::string::npos);
}
