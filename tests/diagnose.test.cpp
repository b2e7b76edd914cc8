// Cross-process: `loom diagnose` on real jobs through `loom up` (two trainer
// processes), one fault injected per rule, each job a small byte-level GPT so
// the whole table runs in a few minutes:
//   healthy             a sane run: "no problem found"
//   diverged            lr=8
//   plateau             lr=1e-7
//   contention          the running trainer given a third of the CPU (stopped 20 ms of every 30)
//   unplaced            a gang of 3 on 2 trainers
//   data_fetch          ingest stopped (SIGSTOP) between submit and placement
//   permission          the text file swapped for a link out of the roots while queued
//   corrupt_checkpoint  every snapshot's bytes flipped, then the trainer killed
//   node_lost           the stage's trainer hung (SIGSTOP) twice: lost, moved, lost again
//   hpo_all_diverged    an hpo search over lr in [5, 9]
//   disk_full           the jobs directory (a tmpfs) filled (root only)
//   out_of_memory       memory pressure (LOOM_PRESSURE_FILE) until micro-batch 1 has nothing left to lower
// Each must be the top cause with repair steps; the accuracy table is printed.
#include "libs/files/files.hpp"
#include "tests/support/byte_template.hpp"
#include "tests/support/edge_sites.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <atomic>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const char* corpus = "/usr/share/common-licenses/GPL-3";

const byte_gpt tiny{.name = "diag-tiny"};

const char* hpo_template = R"(kind = "hpo"

[job]
name = "diag-hpo"
stages = ["search"]

[model]
layers = 2
heads = 4
channels = 64
max_seq_len = 32
vocab = 256
padded_vocab = 256

[data]
tokenizer = "bytes"

[train]
precision = "fp32"
batch = 8
seq_len = 32
steps = 60
seed = 7
threads = 1

[optim]
lr = 3e-3
min_lr = 1e-5
warmup_steps = 5
weight_decay = 0.1
grad_clip = 1.0

[checkpoint]
every_steps = 0
keep = 2

[hpo]
method = "random"
trials = 3
seed = 11
min_steps = 20
max_steps = 60
eta = 3

[hpo.space]
"optim.lr" = {log_uniform = [5.0, 9.0]}
)";

// A tmpfs on `dir` for the test's life (lazily detached: the deployment's
// processes are stopped first, by the up_guard declared after it).
struct tmpfs_guard {
  std::string dir;
  bool mounted = false;
  tmpfs_guard(std::string d, const char* size) : dir(std::move(d)) {
    std::filesystem::create_directories(dir);
    mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, (std::string("size=") + size + ",mode=0700").c_str()) == 0;
  }
  ~tmpfs_guard() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

// CPU taken from a process: a thread stops it (SIGSTOP) for 20 ms of every
// 30 until scope exit, then continues it. Busy loops of our own would not do:
// the kernel shares the CPU between sessions (autogroups), not processes, and
// the trainer has a session of its own, so they barely slowed it.
// The pids whose parent is `pid` (a trainer's stage processes).
std::vector<long> children_of(long pid) {
  std::vector<long> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');  // "pid (comm) state ppid ..."; comm may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == pid) out.push_back(std::stol(name));
  }
  return out;
}

// Stops a trainer and its stage processes 20 ms of every 30 (by pid: the
// trainer the test started and the children it forked).
struct cpu_thief {
  long pid;
  std::atomic<bool> done{false};
  std::vector<long> stopped;
  std::thread t;
  explicit cpu_thief(long p) : pid(p), t([this] {
    while (!done) {
      stopped = children_of(pid);
      stopped.push_back(pid);
      for (long q : stopped) ::kill(static_cast<pid_t>(q), SIGSTOP);
      std::this_thread::sleep_for(20ms);
      for (long q : stopped) ::kill(static_cast<pid_t>(q), SIGCONT);
      std::this_thread::sleep_for(10ms);
    }
  }) {}
  ~cpu_thief() {
    done = true;
    t.join();
    for (long q : stopped) ::kill(static_cast<pid_t>(q), SIGCONT);
  }
};

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Processes stopped with SIGSTOP, continued on scope exit (by pid).
struct stopped_pids {
  std::vector<long> pids;
  void stop(long pid) {
    REQUIRE(::kill(static_cast<pid_t>(pid), SIGSTOP) == 0);
    pids.push_back(pid);
  }
  ~stopped_pids() {
    for (auto p : pids) ::kill(static_cast<pid_t>(p), SIGCONT);
  }
};

struct row {
  std::string fault, expected, got;
  double confidence = 0;
  std::size_t repairs = 0;
  bool skipped = false;
};

struct bench {
  std::string home, templates;
  std::vector<row> rows;

  std::string submit(const std::vector<std::string>& extra, const std::string& tmpl = "diag-tiny") {
    std::vector<std::string> args = {"job", "submit", "--templates", templates, "--template", tmpl};
    args.insert(args.end(), extra.begin(), extra.end());
    auto j = loom_json(home, args);
    REQUIRE_MESSAGE(j.contains("id"), "submit " << json(extra).dump() << ": " << j.dump());
    return j["id"].get<std::string>();
  }
  std::string submit_text(std::vector<std::string> extra, const std::string& text = corpus) {
    extra.insert(extra.begin(), {"--set", "text=" + text});
    return submit(extra);
  }
  json show(const std::string& id) { return loom_json(home, {"job", "show", id}); }
  std::string state(const std::string& id) { return show(id).value("state", ""); }
  std::string stage_dir(const std::string& id, const std::string& stage = "pretrain") {
    return show(id)["out_dir"].get<std::string>() + "/" + stage;
  }
  // The trainer service running `id`'s first stage ("trainer-2" of node "trainer-2@host"; "" when none).
  std::string node_of(const std::string& id) {
    auto j = show(id);
    const std::string node = j["stages"].empty() ? "" : j["stages"][0].value("node", "");
    return node.substr(0, node.find('@'));
  }
  json diagnose(const std::string& id) { return loom_json(home, {"diagnose", id}); }

  // Diagnoses `id` and records the row: `expected` the rule that must come first ("none": no finding).
  void judge(const std::string& fault, const std::string& id, const std::string& expected) {
    auto d = diagnose(id);
    INFO(fault << ": " << d.dump(1));
    row r{fault, expected, "none"};
    if (!d["causes"].empty()) {
      r.got = d["causes"][0].value("rule", "?");
      r.confidence = d["causes"][0].value("confidence", 0.0);
      r.repairs = d["causes"][0]["repair"].size();
    }
    if (r.got != expected) {  // the text form and the speed curve too, for the log
      auto t = run_loom(home, {"diagnose", id});
      std::string speeds;
      for (const auto& line : lines_of(stage_dir(id) + "/metrics.jsonl"))
        if (auto p = json::parse(line, nullptr, false); p.is_object())
          speeds += std::to_string(p.value("step", 0)) + ":" + std::to_string(int(p.value("tokens_per_s", 0.0))) + " ";
      MESSAGE(fault << ": loom diagnose " << id << ":\n" << t.out << t.err << "\nsteps:tokens/s " << speeds);
    }
    CHECK(r.got == expected);
    if (expected != "none") CHECK(r.repairs >= 2);
    else CHECK(d.value("problem_found", true) == false);
    rows.push_back(r);
  }
  void skip(const std::string& fault, const std::string& expected, const std::string& why) {
    MESSAGE(fault << ": not injected here: " << why);
    rows.push_back({fault, expected, "-", 0, 0, true});
  }
  bool wait_state(const std::string& id, const std::vector<std::string>& states, std::chrono::seconds limit = 120s) {
    return eventually([&] {
      const auto s = state(id);
      return std::find(states.begin(), states.end(), s) != states.end();
    }, limit, 200ms);
  }
  // Waits until the stage's metrics log holds `step`.
  bool wait_step(const std::string& id, std::uint64_t step, std::chrono::seconds limit = 60s) {
    return eventually([&] { return last_logged_step(stage_dir(id) + "/metrics.jsonl") >= step; }, limit, 50ms);
  }
  void cancel(const std::string& id) { (void)run_loom(home, {"job", "cancel", id}); }

  // The accuracy table, on stdout and in the test's log; every fault tried must be named first.
  void report() {
    int right = 0, tried = 0;
    std::string table = "fault                                      expected            top cause           confidence\n";
    for (const auto& r : rows) {
      char line[256];
      const std::string conf = r.skipped ? "skipped" : std::to_string(int(r.confidence * 100 + 0.5)) + "%";
      std::snprintf(line, sizeof line, "%-42s %-19s %-19s %s\n", r.fault.c_str(), r.expected.c_str(), r.got.c_str(),
                    conf.c_str());
      table += line;
      if (r.skipped) continue;
      ++tried;
      right += r.got == r.expected;
    }
    table += "named first: " + std::to_string(right) + "/" + std::to_string(tried) + "\n";
    MESSAGE(table);
    std::printf("%s", table.c_str());
    CHECK(right == tried);
  }
};

// Every file of every snapshot under `dir`/checkpoints gets bytes flipped.
int corrupt_snapshots(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir + "/checkpoints", ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file() || it->path().extension() != ".safetensors") continue;
    std::fstream f(it->path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(it->path()) - 16));
    f.write("CORRUPTCORRUPT!!", 16);
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("loom diagnose names the injected fault first, with repair steps, for every rule it can inject, a healthy job has none") {
  temp_dir home{"loom-diagnose"}, tdir{"loom-diagnose-templates"};
  REQUIRE(files::write_atomic(tdir.path() + "/diag-tiny.toml", byte_template(tiny)).ok());
  REQUIRE(files::write_atomic(tdir.path() + "/diag-hpo.toml", hpo_template).ok());
  // diag-gpt2: the same on GPT-2 tokens, for a dataset (ingest's shards hold GPT-2 ids)
  auto gpt2 = tiny;
  gpt2.name = "diag-gpt2";
  gpt2.gpt2 = true;
  REQUIRE(files::write_atomic(tdir.path() + "/diag-gpt2.toml", byte_template(gpt2)).ok());
  tmpfs_guard jobs_fs(home.path() + "/jobs", "256m");  // root only: for the disk_full case
  up_guard guard{home.path()};
  const std::string pressure = home.path() + "/pressure";
  REQUIRE(files::write_atomic(pressure, "memory=0.10\n").ok());
  ::setenv("LOOM_PRESSURE_FILE", pressure.c_str(), 1);
  ::setenv("LOOM_SHED_PAUSE_AFTER_S", "2", 1);
  auto up = run_loom(home.path(), {"up", "--trainers", "2", "--import-root", "/usr/share/common-licenses"}, 90s);
  ::unsetenv("LOOM_PRESSURE_FILE");
  ::unsetenv("LOOM_SHED_PAUSE_AFTER_S");
  REQUIRE_MESSAGE(up.code == 0, up.out << up.err);
  bench b{home.path(), tdir.path(), {}};

  // --- 1: a sane run, and lr=8, side by side.
  const auto healthy = b.submit_text({});
  const auto diverged = b.submit_text({"--set", "lr=8", "--set", "steps=200"});
  REQUIRE(b.wait_state(healthy, {"succeeded", "failed"}));
  REQUIRE(b.wait_state(diverged, {"succeeded", "failed"}));
  b.judge("healthy run", healthy, "none");
  b.judge("lr=8", diverged, "diverged");

  // --- 2: lr=1e-7; a running trainer starved of CPU; a gang of 3 on 2 trainers.
  const auto plateau = b.submit_text({"--set", "lr=1e-7", "--set", "optim.min_lr=1e-8", "--set", "steps=40"});
  REQUIRE(b.wait_state(plateau, {"succeeded", "failed"}));
  b.judge("lr=1e-7", plateau, "plateau");
  const auto contended = b.submit_text({"--set", "steps=1000000", "--set", "batch=32"});
  REQUIRE(b.wait_step(contended, 60));
  {
    const long trainer = pid_of(home.path(), b.node_of(contended));
    REQUIRE(trainer > 0);
    cpu_thief thief(trainer);  // the trainer runs a third of the time
    const std::uint64_t at = last_logged_step(b.stage_dir(contended) + "/metrics.jsonl");
    REQUIRE(b.wait_step(contended, at + 40, 120s));
  }
  b.judge("trainer given a third of the CPU", contended, "contention");
  b.cancel(contended);
  const auto gang = b.submit_text({"--set", "trainers=3", "--set", "train.grad_accum=3"});
  REQUIRE(eventually([&] { return !b.show(gang)["stages"][0].value("waiting", "").empty(); }, 30s));
  b.judge("gang of 3 on 2 trainers", gang, "unplaced");
  b.cancel(gang);
  REQUIRE(b.wait_state(gang, {"cancelled"}));

  // --- 3: two queued jobs whose inputs go bad while they wait behind two long ones.
  auto imp = run_loom(home.path(), {"data", "import", corpus, "--dataset", "corpus"}, 120s);
  REQUIRE_MESSAGE(imp.code == 0, imp.out << imp.err);
  const std::string text = home.path() + "/imports/diag.txt";
  REQUIRE(files::write_atomic(text, *files::read_file(corpus)).ok());
  const auto block1 = b.submit_text({"--set", "steps=1000000"}), block2 = b.submit_text({"--set", "steps=1000000"});
  REQUIRE(b.wait_state(block1, {"running"}));
  REQUIRE(b.wait_state(block2, {"running"}));
  const auto fetch = b.submit({"--set", "dataset=corpus"}, "diag-gpt2");
  const auto denied = b.submit_text({}, text);
  {
    stopped_pids ingest;
    ingest.stop(pid_of(home.path(), "ingest"));
    std::filesystem::remove(text);
    std::filesystem::create_symlink("/etc/os-release", text);
    b.cancel(block1);
    b.cancel(block2);
    REQUIRE(b.wait_state(fetch, {"succeeded", "failed"}));
    REQUIRE(b.wait_state(denied, {"succeeded", "failed"}));
  }
  b.judge("ingest stopped before the fetch", fetch, "data_fetch");
  b.judge("input swapped for a link out of the roots", denied, "permission");

  // --- 4: snapshots corrupted under a stopped trainer; a trainer killed twice.
  const auto corrupt = b.submit_text({"--set", "steps=1000000", "--set", "checkpoint.every_steps=5"});
  REQUIRE(b.wait_step(corrupt, 12));
  {
    const std::string node = b.node_of(corrupt);
    const long pid = pid_of(home.path(), node);
    REQUIRE(pid > 0);
    REQUIRE(::kill(static_cast<pid_t>(pid), SIGSTOP) == 0);
    CHECK(corrupt_snapshots(b.stage_dir(corrupt)) >= 1);
    REQUIRE(::kill(static_cast<pid_t>(pid), SIGKILL) == 0);
  }
  REQUIRE(b.wait_state(corrupt, {"succeeded", "failed"}));
  b.judge("snapshots corrupted, trainer killed", corrupt, "corrupt_checkpoint");

  // A hung host: the stage's trainer stopped (SIGSTOP) misses its heartbeats,
  // the stage moves to the other trainer, which then hangs too: lost twice.
  const auto flap = b.submit_text({"--set", "steps=1000000", "--set", "checkpoint.every_steps=50"});
  {
    stopped_pids hung;
    for (int k = 0; k < 2 && b.state(flap) != "failed"; ++k) {
      REQUIRE(eventually([&] { return b.state(flap) == "running" && !b.node_of(flap).empty(); }, 60s));
      const std::string node = b.node_of(flap);
      const long pid = pid_of(home.path(), node);
      REQUIRE(pid > 0);
      const std::uint64_t at = last_logged_step(b.stage_dir(flap) + "/metrics.jsonl");
      REQUIRE(b.wait_step(flap, at + 20));
      hung.stop(pid);
      REQUIRE(eventually([&] { return b.state(flap) == "failed" || b.node_of(flap) != node; }, 60s));
    }
    REQUIRE(b.wait_state(flap, {"failed"}, 60s));
  }
  b.judge("trainer hung (SIGSTOP), twice", flap, "node_lost");

  // --- 5: an hpo search whose every trial diverges.
  const auto hpo = b.submit({"--set", std::string("text=") + corpus}, "diag-hpo");
  REQUIRE(b.wait_state(hpo, {"succeeded", "failed"}, 180s));
  b.judge("hpo over lr in [5, 9]", hpo, "hpo_all_diverged");

  // --- 6: the jobs directory full.
  if (!jobs_fs.mounted) {
    b.skip("jobs directory full", "disk_full", "mounting a tmpfs needs root");
  } else {
    struct statvfs v {};
    REQUIRE(::statvfs(jobs_fs.dir.c_str(), &v) == 0);
    {
      std::ofstream fill(jobs_fs.dir + "/filler", std::ios::binary);
      const std::string mib(1 << 20, '\0');
      for (std::uint64_t left = std::uint64_t(v.f_bavail) * v.f_frsize; left >= mib.size() && fill; left -= mib.size())
        fill.write(mib.data(), static_cast<std::streamsize>(mib.size()));
    }
    const auto full = b.submit_text({"--set", "checkpoint.every_steps=2"});
    REQUIRE(b.wait_state(full, {"succeeded", "failed"}));
    b.judge("jobs directory full", full, "disk_full");
    std::filesystem::remove(jobs_fs.dir + "/filler");
  }

  // --- 7: memory pressure until the back-off has nothing left, then a pause.
  const auto pressed = b.submit_text({"--set", "steps=1000000", "--set", "train.batch=2", "--set", "train.grad_accum=2"});
  REQUIRE(b.wait_state(pressed, {"running"}));
  REQUIRE(files::write_atomic(pressure, "memory=0.97\n").ok());
  // Micro-batch 2 -> 1, then nothing left to lower (a lone job of one class is not paused).
  REQUIRE(eventually([&] {
    for (const auto& e : stage_events(home.path(), pressed, "pretrain"))
      if (e.starts_with("load_shed: ") && e.find("nothing left to lower") != std::string::npos) return true;
    return false;
  }, 60s));
  b.judge("memory pressure, micro-batch 1", pressed, "out_of_memory");
  REQUIRE(files::write_atomic(pressure, "memory=0.10\n").ok());
  b.cancel(pressed);

  b.report();
}

// The cross-site rules on a cloud and three edge sites on loopback: south's
// trainer reaches the aggregator only through a link of 1 h latency (it never
// contributes), east's through 1 s (every round, which needs both, waits on it).
TEST_CASE("loom diagnose names a site cut off from the cloud and a site late for its rounds on real diloco jobs") {
  cluster c;
  REQUIRE(c.up);
  auto north = start_edge_site(c, "north", "GPL-3");
  std::unique_ptr<edge_site> south, east;
  {
    scoped_env cut("LOOM_LINK_SHAPE_SOUTH", "lat=1h");
    scoped_env slow("LOOM_LINK_SHAPE_EAST", "lat=1s");
    south = start_edge_site(c, "south", "GPL-2");
    east = start_edge_site(c, "east", "GPL-3");
  }
  auto submit = [&](const std::vector<std::string>& sets) {
    std::vector<std::string> args{"job", "submit", "--template", "pretrain-diloco-tiny", "--set", "dataset=text"};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    auto sub = loom_json(c.home.path(), args);
    REQUIRE_MESSAGE(sub.contains("id"), sub.dump());
    return sub["id"].get<std::string>();
  };
  bench b{c.home.path(), "", {}};
  const auto cut = submit({"diloco.sites=[\"north\", \"south\"]", "pretrain.steps=16"});
  const auto late = submit({"diloco.sites=[\"north\", \"east\"]", "pretrain.steps=48"});
  auto jc = wait_job_done(c.home.path(), cut, 300s);
  auto jl = wait_job_done(c.home.path(), late, 300s);
  INFO("cut: " << jc.dump());
  INFO("late: " << jl.dump());
  b.judge("south behind a 1 h link", cut, "site_cut_off");
  b.judge("east behind a 1 s link", late, "late_site");
  b.report();

  // loom report on the late job: one loss curve per site, from the progress the sites reported.
  const std::string page = c.home.path() + "/late.html";
  auto r = run_loom(c.home.path(), {"report", late, "--out", page}, 60s);
  REQUIRE_MESSAGE(r.code == 0, r.out << r.err);
  const auto html = files::read_file(page);
  REQUIRE(html.ok());
  for (const std::string site : {"north", "east"}) {
    const auto at = html->find("/site/" + site + "/loss\" data-steps=\"");
    REQUIRE_MESSAGE(at != std::string::npos, site << " has no curve in the report");
    const auto from = html->find("data-steps=\"", at) + 12;
    const std::string steps = html->substr(from, html->find('"', from) - from);
    INFO(site << " steps: " << steps);
    CHECK(std::count(steps.begin(), steps.end(), ' ') >= 1);  // two points or more
  }
}
