// The chaos harness (issue 32 item 1): one host, the embedded store — or, in
// the second case, a PostgreSQL cluster of the test's own that the faults
// kill -9 too (then start again: crash recovery). While training jobs, dataset imports and the audit traffic they make
// run against a `loom up --trainers 2`, a seeded fault thread
//   - kills -9 a random process of the deployment (a service or a trainer; the
//     watcher restarts it),
//   - opens windows in which every fsync of the deployment fails with EIO
//     (libs/files/fault.hpp: LOOM_FAULTS_DIR/fsync),
//   - opens windows in which the data dir's filesystem is full (the data dir is
//     a tmpfs of its own, filled by one file; needs root and mount(2): without
//     them the run says so and goes on without this fault),
//   - steps the wall clock of every process of the deployment at once (LOOM_FAULTS_DIR/clock,
//     read by loom::wall_now): by ±2 minutes, ±1 hour or +31 days (past the
//     keys' 30-day rotation), for 1-4 s, then back.
// After the faults stop it checks the invariants: every job whose submit got
// a reply exists once (a retry under the same request id is the same job) and
// ends; every job that succeeded has final parameters bitwise equal to the
// same job run before the chaos began (resumed bit-identically through every
// kill; every other job a gang of both trainers, re-formed after each kill of
// a member, against a gang reference); every submit that got a reply is in the audit chain and the chain
// verifies; every published snapshot verifies; every dataset that an import
// reported done verifies; no temporary file is left in the data dir; each
// service's open files and memory are back near their baseline.
//
// LOOM_CHAOS_SECONDS (default 60; 40 on PostgreSQL) and LOOM_CHAOS_SEED
// (default 2026) set the run; tests/chaos/run.sh --minutes N --seed S runs a long one. The last line
// is `case=chaos seed=S seconds=D faults=N ... violations=0`.
#include "libs/auth/token.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "tests/chaos/chaos_support.hpp"
#include "tests/support/at_rest.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace loom::test::chaos;
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const char* licences = "/usr/share/common-licenses";

// The data dir on a tmpfs of its own (so filling it fills nothing else);
// unmounted on scope exit. `mounted` is false where mount(2) is refused.
struct tmpfs_mount {
  std::string dir;
  bool mounted = false;
  tmpfs_mount(std::string d, const std::string& size) : dir(std::move(d)) {
    const std::string opts = "size=" + size + ",mode=0700";
    mounted = ::geteuid() == 0 && ::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  ~tmpfs_mount() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

// Fills the filesystem of `dir` with one file until ENOSPC; removing it frees the space.
void fill_disk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::string block(1 << 20, 'x');
  for (int i = 0; i < 1 << 16; ++i)
    if (::write(fd, block.data(), block.size()) <= 0) break;
  for (int i = 0; i < 1 << 12; ++i)  // the last partial pages
    if (::write(fd, block.data(), 4096) <= 0) break;
  ::close(fd);
}

// name -> pid of every healthy process `loom status` lists.
std::map<std::string, long> healthy_processes(const std::string& home) {
  std::map<std::string, long> out;
  for (auto& s : loom_json(home, {"status"}).value("services", json::array()))
    if (s.value("healthy", false)) out[s.value("name", "")] = s.value("pid", 0L);
  return out;
}

// The deployment's PostgreSQL: a throwaway cluster this test starts
// (scripts/pg_throwaway.sh, port LOOM_CHAOS_PG_PORT), kills -9 and starts
// again, and stops at the end — only its own processes, by pid.
struct pg_cluster {
  std::string script = std::string(LOOM_SOURCE_DIR) + "/scripts/pg_throwaway.sh";
  std::string port, dir;
  bool started = false;
  explicit pg_cluster(int p)
      : port(std::to_string(p)),
        dir(std::string(std::getenv("TMPDIR") && *std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
            "/loom-pg-" + port) {}
  ~pg_cluster() {
    if (started) (void)run({"/bin/sh", script, "stop", port}, 60s);
  }
  std::string start() {
    auto r = run({"/bin/sh", script, "start", port}, 90s);
    started = r.code == 0;
    return started ? "" : r.out + r.err;
  }
  std::string url() const { return "postgresql://postgres@127.0.0.1:" + port + "/postgres"; }
  long postmaster() const {
    std::ifstream in(dir + "/data/postmaster.pid");
    long pid = 0;
    in >> pid;
    return pid;
  }
  // kill -9 of the postmaster; its backends end on their own when they see it
  // gone (killed after 5 s if not). Returns the postmaster's pid (0: none running).
  long crash() {
    const long pm = postmaster();
    if (pm <= 0 || gone(pm)) return 0;
    const auto kids = children_of(pm);
    if (::kill(static_cast<pid_t>(pm), SIGKILL) != 0) return 0;
    const auto deadline = steady::now() + 10s;
    bool forced = false;
    for (;;) {
      bool all = gone(pm);
      for (long k : kids) all = all && gone(k);
      if (all || steady::now() >= deadline) break;
      if (!forced && steady::now() >= deadline - 5s) {
        for (long k : kids)
          if (!gone(k)) ::kill(static_cast<pid_t>(k), SIGKILL);
        forced = true;
      }
      std::this_thread::sleep_for(20ms);
    }
    // The killed postmaster may stay a zombie (a container's init that does not
    // reap): its lock file would name a pid that still exists. It is dead.
    if (stat_of(pm).first == 'Z') ::unlink((dir + "/data/postmaster.pid").c_str());
    return pm;
  }
  // Started again on its data (crash recovery); a few tries while the old
  // shared memory is still being released. "" or what the last try said.
  std::string restart() {
    std::string said;
    for (int i = 0; i < 5; ++i) {
      auto r = run({"/bin/sh", script, "restart", port}, 90s);
      if (r.code == 0) return "";
      said = r.out + r.err;
      std::this_thread::sleep_for(1s);
    }
    return said;
  }
};

struct fault_thread : fault_pacer {
  std::string home, faults_dir;
  bool disk_fill = false;
  pg_cluster* pg = nullptr;  // also kill -9 PostgreSQL (then start it again)
  std::uint32_t seed = 0;
  steady::time_point until, t0;
  fault_log log;

  void start() {
    run([this] { loop(); });
  }
  void loop() {
    std::mt19937 rng(seed);
    while (!stop && steady::now() < until) {
      pause(std::chrono::milliseconds(1500 + rng() % 3500));
      if (stop || steady::now() >= until) break;
      const unsigned pick = rng() % 20;
      if (pg && pick < 3) {  // PostgreSQL down for 0.5-3 s: kill -9, then crash recovery
        const auto hold = std::chrono::milliseconds(500 + rng() % 2500);
        const long pm = pg->crash();
        if (pm == 0) continue;
        log.add("pg_kill", "kill -9 postgres (postmaster pid " + std::to_string(pm) + "), down for " +
                               std::to_string(hold.count()) + " ms", t0);
        pause(hold);
        if (auto why = pg->restart(); !why.empty()) log.add("pg_restart_failed", "postgres did not start again: " + why, t0);
      } else if (pick < 11) {
        auto procs = healthy_processes(home);
        if (procs.empty()) continue;
        auto it = procs.begin();
        std::advance(it, rng() % procs.size());
        if (it->second > 0 && ::kill(static_cast<pid_t>(it->second), SIGKILL) == 0)
          log.add("kill", "kill -9 " + it->first + " (pid " + std::to_string(it->second) + ")", t0);
      } else if (pick >= 18) {
        // The host's clock steps (NTP, a resumed VM) for every process at
        // once, by minutes, an hour or past the 30-day key rotation, then back.
        static constexpr long jumps[] = {120, -120, 3600, -3600, 31L * 86400};
        const long by = jumps[rng() % std::size(jumps)];
        const auto hold = std::chrono::milliseconds(1000 + rng() % 3000);
        std::ofstream(faults_dir + "/clock") << by << "\n";
        log.add("clock", "wall clock " + std::string(by > 0 ? "+" : "") + std::to_string(by) + " s for " +
                             std::to_string(hold.count()) + " ms", t0);
        pause(hold);
        ::unlink((faults_dir + "/clock").c_str());
      } else if (pick < 15 || !disk_fill) {
        const auto hold = std::chrono::milliseconds(500 + rng() % 2500);
        std::ofstream(faults_dir + "/fsync").put('1');
        log.add("fsync", "fsync fails for " + std::to_string(hold.count()) + " ms", t0);
        pause(hold);
        ::unlink((faults_dir + "/fsync").c_str());
      } else {
        const auto hold = std::chrono::milliseconds(500 + rng() % 2500);
        fill_disk(home + "/chaos-filler");
        log.add("disk_full", "data dir full for " + std::to_string(hold.count()) + " ms", t0);
        pause(hold);
        ::unlink((home + "/chaos-filler").c_str());
      }
    }
    ::unlink((faults_dir + "/fsync").c_str());
    ::unlink((faults_dir + "/clock").c_str());
    ::unlink((home + "/chaos-filler").c_str());
  }
};

const std::vector<std::string> job_args = {"job", "submit", "--template", "pipeline-test", "--set",
                                           std::string("text=") + licences + "/GPL-3", "--set", "threads=1",
                                           "--set", "pretrain.train.steps=40"};

// The same pipeline with its pretrain stage on a gang of both trainers
// (data-parallel, one micro-batch each): a kill of either member re-forms it.
const std::vector<std::string> gang_args = [] {
  auto a = job_args;
  a.insert(a.end(), {"--set", "pretrain.trainers=2", "--set", "train.grad_accum=2"});
  return a;
}();

// A learning-rate search (ASHA, 8 trials over a 2-layer model) across both
// trainers: trials start, are promoted from their own snapshots and stopped
// while the faults go on.
const std::vector<std::string> hpo_args = {"job", "submit", "--template", "hpo-lr-tiny", "--set",
                                           std::string("text=") + licences + "/GPL-3", "--set",
                                           std::string("hpo.validation=") + licences + "/LGPL-3"};

// Submits the chaos job (or `submit`'s) under request id `rid`, retrying the same request
// while the scheduler does not answer (killed, restarting) for up to `limit`:
// its job id, or "" when no attempt got a reply.
std::string submit_job(const std::string& home, const std::string& rid, std::chrono::seconds limit,
                       const std::vector<std::string>& submit = job_args) {
  auto args = submit;
  args.insert(args.end(), {"--request-id", rid});
  for (auto until = steady::now() + limit;;) {
    auto j = loom_json(home, args, 60s);
    if (j.contains("id")) return j["id"].get<std::string>();
    if (steady::now() >= until) return "";
    std::this_thread::sleep_for(500ms);  // the scheduler is restarting: ask again
  }
}

// One chaos run on the embedded store, or on a PostgreSQL cluster of its
// own that the faults kill -9 too (`postgres`).
void chaos_run(bool postgres) {
  const long seconds = env_number("LOOM_CHAOS_SECONDS", postgres ? 40 : 60, 10, 24 * 3600);
  const auto seed = static_cast<std::uint32_t>(env_number("LOOM_CHAOS_SEED", 2026, 0, 0xffffffffL));
  std::optional<pg_cluster> pg;
  if (postgres) {
    pg.emplace(static_cast<int>(env_number("LOOM_CHAOS_PG_PORT", 55447, 1024, 65535)));
    const std::string why = pg->start();
    REQUIRE_MESSAGE(why.empty(), "the chaos run's PostgreSQL did not start: " << why);
    ::setenv("LOOM_DATABASE_URL", pg->url().c_str(), 1);  // for `loom up` and every later loom command, as in a shell
  }
  struct unset_url {
    ~unset_url() { ::unsetenv("LOOM_DATABASE_URL"); }
  } unset_at_end;
  temp_dir home("loom-chaos");
  tmpfs_mount mnt(home.path(), "2g");
  if (!mnt.mounted)
    MESSAGE("LOOM_TEST_SKIPPED: the full-disk fault (mounting a tmpfs data dir needs root and mount(2)); "
            "the other faults run");
  temp_dir faults("loom-chaos-faults");
  up_guard guard{home.path()};
  ::setenv("LOOM_FAULTS_DIR", faults.path().c_str(), 1);  // the watcher hands it to every process it starts
  auto up = run_loom(home.path(), {"up", "--trainers", "2", "--import-root", licences}, 120s);
  ::unsetenv("LOOM_FAULTS_DIR");
  INFO(up.out << up.err);
  REQUIRE(up.code == 0);

  // The references: the chaos job and its gang form, each run once with no fault.
  const std::string ref_id = submit_job(home.path(), "chaos-reference", 60s);
  const std::string gang_ref_id = submit_job(home.path(), "chaos-gang-reference", 60s, gang_args);
  REQUIRE(!ref_id.empty());
  REQUIRE(!gang_ref_id.empty());
  const json ref = wait_done(home.path(), ref_id, 300s, 1000ms);
  REQUIRE(ref["state"] == "succeeded");
  const json gang_ref = wait_done(home.path(), gang_ref_id, 300s, 1000ms);
  REQUIRE(gang_ref["state"] == "succeeded");
  REQUIRE(gang_ref["stages"][0]["members"].size() == 2);
  // rid -> what its submit sends; job id -> the parameters it must end with.
  auto args_of = [&](const std::string& rid) -> const std::vector<std::string>& {
    return rid.find("-hpo") != std::string::npos ? hpo_args : rid.find("-gang-") != std::string::npos ? gang_args : job_args;
  };
  const std::pair<std::string, std::string> want_plain{final_params_sha(ref, "pretrain"), final_params_sha(ref, "sft")},
      want_gang{final_params_sha(gang_ref, "pretrain"), final_params_sha(gang_ref, "sft")};
  std::map<std::string, proc_use> baseline;
  for (auto& [name, pid] : healthy_processes(home.path())) baseline[name] = use_of(pid);
  REQUIRE(baseline.size() >= 6);

  // The chaos.
  fault_thread ft;
  ft.home = home.path();
  ft.faults_dir = faults.path();
  ft.disk_fill = mnt.mounted;
  ft.pg = pg ? &*pg : nullptr;
  ft.seed = seed;
  ft.t0 = steady::now();
  ft.until = ft.t0 + std::chrono::seconds(seconds);
  ft.start();

  std::mt19937 rng(seed ^ 0x5eedu);
  // A job keeps about 160 MB of snapshots (two stages, two of 40 MB each):
  // at most 8 besides the reference (of 2 GiB), however long the run.
  const int max_jobs = static_cast<int>(std::clamp(seconds / 20, 2L, 8L));
  std::map<std::string, std::string> job_of;  // request id -> job id ("" while unanswered)
  std::set<std::string> imported, import_failed;
  const std::vector<std::string> texts = {"Apache-2.0", "GPL-2", "LGPL-2.1", "MPL-2.0", "GFDL-1.3", "Artistic"};
  int imports = 0, reads = 0, pipelines = 0;
  // One search, at once: it runs beside the chaos jobs while the faults go on.
  const std::string hpo_rid = "chaos-" + std::to_string(seed) + "-hpo";
  job_of[hpo_rid] = submit_job(home.path(), hpo_rid, 20s, hpo_args);
  while (steady::now() < ft.until) {
    const unsigned pick = rng() % 4;
    if (pick == 0 && pipelines < max_jobs) {
      // Every other one a gang: both trainers, re-formed after each kill of a member.
      const bool gang = pipelines % 2 == 1;
      const std::string rid = "chaos-" + std::to_string(seed) + (gang ? "-gang-" : "-job-") + std::to_string(pipelines++);
      job_of[rid] = submit_job(home.path(), rid, 20s, args_of(rid));
    } else if (pick <= 2 && imports < seconds / 4) {
      const std::string name = "chaos-" + std::to_string(imports);
      auto r = run_loom(home.path(),
                        {"data", "import", std::string(licences) + "/" + texts[imports % texts.size()], "--dataset", name},
                        120s);
      (r.code == 0 ? imported : import_failed).insert(name);
      ++imports;
    } else {
      loom_json(home.path(), {"job", "list"});  // reads, each an audited request
      ++reads;
      std::this_thread::sleep_for(200ms);
    }
  }
  ft.join();
  const auto faulted_ms = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - ft.t0).count();

  // Settle: every process healthy again, unanswered submits answered.
  std::vector<std::string> violations;
  auto violation = [&](const std::string& v) {
    violations.push_back(v);
    MESSAGE("VIOLATION: " << v);
  };
  if (ft.log.counts["pg_restart_failed"] > 0) violation("PostgreSQL did not start again after a kill -9 (faults below)");
  if (!eventually([&] { return healthy_processes(home.path()).size() >= baseline.size(); }, 90s, 500ms))
    violation("not every process is healthy 90 s after the faults stopped: " + loom_json(home.path(), {"status"}).dump());
  for (auto& [rid, id] : job_of) {
    const std::string again = submit_job(home.path(), rid, 30s, args_of(rid));
    if (again.empty()) violation("submit " + rid + " gets no reply after the faults stopped");
    else if (!id.empty() && again != id) violation("submit " + rid + " named job " + id + ", its retry job " + again);
    if (id.empty()) id = again;
  }

  // Jobs: each exactly once, each ends; a success is bitwise the reference.
  std::set<std::string> want{ref_id, gang_ref_id};
  std::set<std::string> gangs;
  for (auto& [rid, id] : job_of)
    if (rid.find("-gang-") != std::string::npos) gangs.insert(id);
  for (auto& [rid, id] : job_of)
    if (!id.empty()) want.insert(id);
  std::map<std::string, std::string> failed;
  int succeeded = 0, search_resumed = 0;
  int gangs_ok = 0;
  for (const auto& id : want) {
    if (id == ref_id || id == gang_ref_id) continue;
    const json j = wait_done(home.path(), id, 600s, 1000ms);
    const std::string st = j.value("state", "");
    if (st == "succeeded" && id == job_of[hpo_rid]) {  // a search: it ends with its best trial named
      ++succeeded;
      const std::string best = j["stages"][0].value("hpo_best", "");
      if (!best.starts_with("best trial ")) violation("search " + id + " succeeded naming no best trial: " + j.dump());
      // How often a restarted scheduler picked the search up from its journal.
      const json logs = loom_json(home.path(), {"job", "logs", id}, 30s);
      for (const auto& e : logs.value("events", json::array()))
        search_resumed += e.value("kind", "") == "hpo_resumed";
    } else if (st == "succeeded") {
      ++succeeded;
      const bool gang = gangs.count(id) > 0;
      gangs_ok += gang;
      const auto& want_sha = gang ? want_gang : want_plain;
      if (final_params_sha(j, "pretrain") != want_sha.first || final_params_sha(j, "sft") != want_sha.second)
        violation(std::string(gang ? "gang " : "") + "job " + id +
                  " succeeded with parameters unlike the uninterrupted reference's");
    } else if (st == "failed") {
      failed[id] = j.dump();
      violation("job " + id + " failed: " + j.value("error", j.dump()));
    } else {
      violation("job " + id + " did not end within 600 s: " + j.dump());
    }
  }
  std::vector<std::string> listed;
  for (auto& j : loom_json(home.path(), {"job", "list"}).value("jobs", json::array())) listed.push_back(j.value("id", ""));
  for (const auto& v : job_list_violations(listed, want)) violation(v);

  // The audit chain: every answered submit is in its job's trail, every
  // import reported done is named in it, and the chain verifies.
  for (auto& [rid, id] : job_of) {
    if (id.empty()) continue;
    bool found = false;
    for (auto& e : loom_json(home.path(), {"audit", "trail", id}).value("events", json::array()))
      found = found || e.value("request_id", "") == rid;
    if (!found) violation("submit " + rid + " (job " + id + ") was answered but is not in the audit chain");
  }
  const std::string tail = run_loom(home.path(), {"audit", "tail", "--lines", "10000", "--json"}, 120s).out;
  for (const auto& name : imported)
    if (tail.find("\"" + name + "\"") == std::string::npos)
      violation("import of dataset " + name + " reported done but is not in the audit chain's newest 10000 events");
  auto verify = run_loom(home.path(), {"audit", "verify"}, 120s);
  if (verify.code != 0) violation("loom audit verify: " + verify.out + verify.err);

  // Every published snapshot verifies (sealed ones through the deployment's keys).
  int snapshots = 0;
  {
    process_keys_of keys(home.path());
    auto key = auth::load_token_key(layout::paths{home.path()}.checkpoint_key());
    REQUIRE(key.ok());
    for (auto& [dir, step] : snapshots_under(home.path())) {
      ++snapshots;
      auto problems = ckpt::verify_snapshot(dir, step, *key);
      for (auto& p : problems) violation("snapshot " + dir + ": " + p);
    }
  }

  // Every dataset an import reported done verifies.
  for (const auto& name : imported) {
    auto v = run_loom(home.path(), {"data", "verify", name}, 120s);
    if (v.code != 0) violation("dataset " + name + " (imported) does not verify: " + v.out + v.err);
  }

  // No temporary file left behind.
  for (auto& f : temp_files(home.path())) violation("temporary file left behind: " + f);

  // Open files and memory back near their baseline.
  for (auto& [name, pid] : healthy_processes(home.path()))
    if (baseline.count(name))
      if (auto over = over_baseline(name, use_of(pid), baseline[name]); !over.empty()) violation(over);

  if (!violations.empty()) {  // what the deployment said, for the one who reads the failure
    std::ostringstream diag;
    auto df = run({"/bin/df", "-h", home.path()});
    auto du = run({"/usr/bin/du", "-sh", "--", home.path() + "/jobs", home.path() + "/ingest", home.path() + "/logs",
                   home.path() + "/audit"});
    diag << df.out << du.out;
    const layout::paths paths{home.path()};
    for (const auto& name : {"watcher", "scheduler", "ingest", "audit", "trainer", "trainer-2", "aggregator"}) {
      auto text = files::read_file(name == std::string("watcher") ? paths.watcher_log() : paths.log(name));
      if (!text) continue;
      diag << "--- " << name << " log, last lines:\n" << last_lines(*text, 25) << "\n";
    }
    MESSAGE(diag.str());
  }

  {
    std::lock_guard lock(ft.log.mu);
    std::ostringstream faults_text;
    for (auto& l : ft.log.lines) faults_text << "  " << l << "\n";
    MESSAGE("faults injected:\n" << faults_text.str() << "data dir at the end:\n"
                                   << run({"/bin/df", "-h", home.path()}).out);
    int total = 0;
    for (auto& [k, n] : ft.log.counts) total += n;
    std::printf("case=chaos store=%s seed=%u seconds=%ld faulted_ms=%lld faults=%d kills=%d pg_kills=%d fsync_windows=%d "
                "disk_full_windows=%d clock_jumps=%d jobs=%zu succeeded=%d gangs_ok=%d search_resumed=%d imports=%d imports_ok=%zu "
                "reads=%d snapshots=%d violations=%zu\n",
                postgres ? "postgres" : "embedded", seed, seconds, static_cast<long long>(faulted_ms), total,
                ft.log.counts["kill"], ft.log.counts["pg_kill"], ft.log.counts["fsync"], ft.log.counts["disk_full"],
                ft.log.counts["clock"], job_of.size(), succeeded, gangs_ok, search_resumed, imports, imported.size(), reads,
                snapshots, violations.size());
    std::fflush(stdout);
  }
  CHECK(violations.empty());
}

}  // namespace

TEST_CASE("chaos: kill -9, failing fsync, a full disk and clock steps under jobs, a search and imports, then every invariant holds") {
  chaos_run(false);
}

TEST_CASE("chaos on PostgreSQL: the same faults and kill -9 of PostgreSQL itself, then every invariant holds") {
  chaos_run(true);
}
