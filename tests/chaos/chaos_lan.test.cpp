// The chaos harness across hosts (issue 32 item 1): a cloud and two edge
// sites, each a host of its own (network and mount namespaces on a bridge,
// tests/multihost/lan.hpp), the cloud on its embedded store. While cross-site
// jobs (pretrain-diloco-tiny over north and south), single-site jobs (the
// chaos pipeline for zone north or south, on that site's trainer), imports on
// the sites and audited reads run, a seeded fault thread
//   - cuts a host's only link (its switch port down) for 1-5 s, often past
//     the roster's death window — the cloud's (every site cut off at once)
//     or a site's,
//   - kills -9 a random process of a random host (the watcher of that host
//     restarts it),
//   - steps one host's wall clock (LOOM_FAULTS_DIR/clock of that host only:
//     the hosts disagree on the time) by ±2 minutes, ±1 hour or +31 days,
//   - makes every fsync of one host fail for 0.5-3 s.
// Then every link goes up and the invariants are checked on every host: each
// answered submit is one job, listed once, and ends succeeded; a single-site
// job's parameters are bitwise its uninterrupted reference's; each cross-site
// job's global model (the cloud's) is published and verifies; every snapshot
// on every host verifies under that host's keys; every answered submit is in
// the cloud's audit chain and every host's chain verifies; every import
// reported done verifies at its site; no temporary file on any host; every
// process's open files and memory near their baseline; both sites' links up.
//
// LOOM_CHAOS_SECONDS (default 40) and LOOM_CHAOS_SEED (default 2026);
// tests/chaos/run.sh --hosts --minutes N --seed S runs a long one. The last line
// is `case=chaos_lan seed=S seconds=D faults=N ... violations=0`. Root,
// iproute2 and util-linux only: otherwise skipped (LOOM_TEST_SKIPPED).
#include "libs/auth/token.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "tests/chaos/chaos_support.hpp"
#include "tests/multihost/lan.hpp"
#include "tests/multihost/lan_checks.hpp"
#include "tests/support/at_rest.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace loom::test::chaos;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// A single-site job: the chaos pipeline (pretrain 40 steps, then SFT) on the
// text Debian ships on every host, for one site's trainer.
std::vector<std::string> zone_args(const std::string& zone) {
  return {"job", "submit", "--template", "pipeline-test", "--zone", zone, "--set",
          std::string("text=") + licences + "/GPL-3", "--set", "threads=1", "--set", "pretrain.train.steps=40"};
}

// A cross-site job: DiLoCo over both sites, each on its own dataset "text".
const std::vector<std::string> diloco_args = {"job",   "submit", "--template", "pretrain-diloco-tiny",
                                              "--set", "diloco.sites=[\"north\", \"south\"]",
                                              "--set", "dataset=text",
                                              "--set", "pretrain.steps=24"};

std::vector<std::string> args_of(const std::string& rid) {
  if (rid.find("-diloco-") != std::string::npos) return diloco_args;
  return zone_args(rid.find("-south-") != std::string::npos ? "south" : "north");
}

// name -> pid of every healthy process that `loom status` on host `h` lists as its own.
std::map<std::string, long> healthy_on(lan& net, const lan_host& h) {
  std::map<std::string, long> out;
  for (const auto& s : as_json(net.loom(h, {"status", "--json"}, 30s)).value("services", json::array()))
    if (s.value("healthy", false) && !s.value("other_host", false) && s.value("pid", 0L) > 0)
      out[s.value("name", "")] = s.value("pid", 0L);  // a site lists the cloud's services too: not its own
  return out;
}

struct lan_faults : fault_pacer {
  lan* net = nullptr;
  std::vector<lan_host*> hosts;              // cloud, north, south
  std::map<std::string, std::string> dirs;  // host -> its LOOM_FAULTS_DIR, as this process sees it
  std::uint32_t seed = 0;
  steady::time_point t0, until;
  fault_log log;

  void start() {
    run([this] { loop(); });
  }
  void loop() {
    std::mt19937 rng(seed);
    while (!stop && steady::now() < until) {
      pause(std::chrono::milliseconds(1500 + rng() % 3500));
      if (stop || steady::now() >= until) break;
      lan_host& h = *hosts[rng() % hosts.size()];
      const unsigned pick = rng() % 20;
      if (pick < 8) {  // kill -9 of one of the host's processes
        auto procs = healthy_on(*net, h);
        if (procs.empty()) continue;
        auto it = procs.begin();
        std::advance(it, rng() % procs.size());
        if (::kill(static_cast<pid_t>(it->second), SIGKILL) == 0)
          log.add("kill", "kill -9 " + h.name + "'s " + it->first + " (pid " + std::to_string(it->second) + ")", t0);
      } else if (pick < 15) {  // the host's only link down
        // Often past the roster's death window (3 missed heartbeats of 1 s):
        // the site's trainer is declared dead and its stage requeued; back,
        // the trainer says it was cut off and the loss is taken back (README).
        const auto hold = std::chrono::milliseconds(1000 + rng() % 4000);
        if (!net->set_link(h, false)) continue;
        log.add("link_cut", h.name + "'s link down for " + std::to_string(hold.count()) + " ms", t0);
        pause(hold);
        if (!net->set_link(h, true)) log.add("link_restore_failed", h.name + "'s link did not come up", t0);
      } else if (pick < 18) {  // this host's clock steps; the others keep theirs
        static constexpr long jumps[] = {120, -120, 3600, -3600, 31L * 86400};
        const long by = jumps[rng() % std::size(jumps)];
        const auto hold = std::chrono::milliseconds(1000 + rng() % 3000);
        std::ofstream(dirs[h.name] + "/clock") << by << "\n";
        log.add("clock", h.name + "'s wall clock " + std::string(by > 0 ? "+" : "") + std::to_string(by) + " s for " +
                             std::to_string(hold.count()) + " ms", t0);
        pause(hold);
        ::unlink((dirs[h.name] + "/clock").c_str());
      } else {
        const auto hold = std::chrono::milliseconds(500 + rng() % 2500);
        std::ofstream(dirs[h.name] + "/fsync").put('1');
        log.add("fsync", "fsync fails on " + h.name + " for " + std::to_string(hold.count()) + " ms", t0);
        pause(hold);
        ::unlink((dirs[h.name] + "/fsync").c_str());
      }
    }
    for (auto* h : hosts) {
      net->set_link(*h, true);
      ::unlink((dirs[h->name] + "/fsync").c_str());
      ::unlink((dirs[h->name] + "/clock").c_str());
    }
  }
};

// Submits at the cloud under request id `rid`, retrying the same request
// while nothing answers (the scheduler killed, a link cut) for up to `limit`:
// the job id, or "".
std::string submit_at(lan& net, lan_host& cloud, const std::string& rid, std::chrono::seconds limit) {
  auto args = args_of(rid);
  args.insert(args.end(), {"--request-id", rid, "--json"});
  for (auto until = steady::now() + limit;;) {
    auto r = net.loom(cloud, args, 60s);
    auto j = as_json(r);
    if (j.contains("id")) return j["id"].get<std::string>();
    if (steady::now() >= until) {
      MESSAGE("submit " << rid << " got no job: " << r.out << r.err);
      return "";
    }
    std::this_thread::sleep_for(500ms);
  }
}

std::string final_sha(lan& net, const lan_host& site, const json& job, const std::string& stage) {
  for (const auto& s : job.value("stages", json::array()))
    if (s.value("name", "") == stage && s.value("checkpoint", "") != "")
      return listed_sha256(net.seen_from_outside(site, s["checkpoint"].get<std::string>()), "model.safetensors");
  return "";
}

}  // namespace

TEST_CASE("chaos across hosts: links cut, kill -9 on every host, one host's clock stepped, under cross-site and "
          "single-site jobs, then every invariant holds on every host") {
  const long seconds = env_number("LOOM_CHAOS_SECONDS", 40, 10, 24 * 3600);
  const auto seed = static_cast<std::uint32_t>(env_number("LOOM_CHAOS_SEED", 2026, 0, 0xffffffffL));
  remove_lan_leftovers();
  lan net({"cloud", "north", "south"});
  if (auto why = net.make(); !why.empty()) {
    MESSAGE("LOOM_TEST_SKIPPED: cannot make three hosts (network and mount namespaces on a bridge): " << why);
    return;
  }
  auto& cloud = net.host("cloud");
  auto& north = net.host("north");
  auto& south = net.host("south");
  std::vector<lan_host*> hosts{&cloud, &north, &south};
  const auto t_setup = steady::now();

  // Each host's faults dir on its own tmpfs; its watcher hands it to every process it starts.
  lan_faults ft;
  ft.net = &net;
  ft.hosts = hosts;
  std::map<std::string, std::string> inside;  // host -> its faults dir, as the host sees it
  for (auto* h : hosts) {
    inside[h->name] = net.root() + "/" + h->name + "/faults";
    ft.dirs[h->name] = net.seen_from_outside(*h, inside[h->name]);
    fs::create_directories(ft.dirs[h->name]);
  }
  auto up = net.loom(cloud, {"up", "--listen", "0.0.0.0", "--advertise", cloud.ip, "--ports", "7400-7499", "--import-root", licences}, 120s,
                     {{"LOOM_FAULTS_DIR", inside["cloud"]}});
  REQUIRE_MESSAGE(up.code == 0, up.out << up.err);
  for (auto* site : {&north, &south}) {
    auto tok = as_json(net.loom(cloud, {"site", "token", "--site", site->name, "--json"}, 30s));
    REQUIRE(tok.contains("token"));
    auto r = net.loom(*site, {"up", "--site", site->name, "--cloud", tok.value("cloud", ""), "--enrol-token",
                              tok.value("token", ""), "--import-root", licences, "--listen", site->ip},
                      120s, {{"LOOM_FAULTS_DIR", inside[site->name]}});
    REQUIRE_MESSAGE(r.code == 0, site->name << ": " << r.out << r.err);
    const std::string text = site == &north ? "GPL-3" : "GPL-2";
    auto imp = net.loom(*site, {"data", "import", std::string(licences) + "/" + text, "--dataset", "text"}, 120s);
    REQUIRE_MESSAGE(imp.code == 0, imp.out << imp.err);
  }
  REQUIRE(eventually(
      [&] {
        int registered = 0;
        for (const auto& s : as_json(net.loom(cloud, {"site", "list", "--json"}, 20s)).value("sites", json::array()))
          registered += static_cast<int>(s.value("trainers", json::array()).size());
        return registered == 2;
      },
      60s));

  // The reference: the single-site job once, with no fault, on north.
  const std::string ref_id = submit_at(net, cloud, "chaos-lan-reference", 60s);
  REQUIRE(!ref_id.empty());
  const json ref = wait_job(net, cloud, ref_id, 300s);
  REQUIRE_MESSAGE(ref.value("state", "") == "succeeded", ref.dump());
  const std::pair<std::string, std::string> want{final_sha(net, north, ref, "pretrain"), final_sha(net, north, ref, "sft")};
  REQUIRE(!want.first.empty());
  std::map<std::string, proc_use> baseline;  // "host/process" -> use
  for (auto* h : hosts)
    for (auto& [name, pid] : healthy_on(net, *h)) baseline[h->name + "/" + name] = use_of(pid);
  {
    std::ostringstream listed;
    for (auto& [k, u] : baseline) listed << " " << k;
    MESSAGE("processes at the baseline:" << listed.str() << "; set up in "
                                         << std::chrono::duration<double>(steady::now() - t_setup).count() << " s");
  }

  // The chaos.
  ft.seed = seed;
  ft.t0 = steady::now();
  ft.until = ft.t0 + std::chrono::seconds(seconds);
  ft.start();
  std::mt19937 rng(seed ^ 0x1a2bu);
  const int max_jobs = static_cast<int>(std::clamp(seconds / 10, 2L, 8L));
  std::map<std::string, std::string> job_of;  // request id -> job id ("" while unanswered)
  std::map<std::string, lan_host*> imported, import_failed;  // dataset -> its site
  const std::vector<std::string> texts = {"Apache-2.0", "LGPL-2.1", "MPL-2.0", "Artistic"};
  int jobs = 0, imports = 0, reads = 0;
  while (steady::now() < ft.until) {
    const unsigned pick = rng() % 4;
    if (pick == 0 && jobs < max_jobs) {
      // Cross-site and single-site in turn, the single-site ones on north and south in turn.
      const std::string kind = jobs % 2 == 0 ? "diloco" : (jobs % 4 == 1 ? "north" : "south");
      const std::string rid = "chaos-lan-" + std::to_string(seed) + "-" + kind + "-" + std::to_string(jobs++);
      job_of[rid] = submit_at(net, cloud, rid, 20s);
    } else if (pick == 1 && imports < seconds / 8) {
      lan_host& site = imports % 2 == 0 ? north : south;
      const std::string name = "chaos-" + std::to_string(imports);
      auto r = net.loom(site, {"data", "import", std::string(licences) + "/" + texts[imports % texts.size()], "--dataset", name},
                        120s);
      (r.code == 0 ? imported : import_failed)[name] = &site;
      ++imports;
    } else {
      net.loom(cloud, {"job", "list", "--json"}, 30s);  // reads, each an audited request
      net.loom(cloud, {"site", "list", "--json"}, 30s);
      reads += 2;
      std::this_thread::sleep_for(200ms);
    }
  }
  ft.join();
  const auto faulted_ms = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - ft.t0).count();

  std::vector<std::string> violations;
  auto violation = [&](const std::string& v) {
    violations.push_back(v);
    MESSAGE("VIOLATION: " << v);
  };
  if (ft.log.counts["link_restore_failed"] > 0) violation("a cut link did not come up again (faults below)");
  // Settle: every process of every host healthy, both sites' links up at the cloud.
  for (auto* h : hosts) {
    std::size_t want_n = 0;
    for (auto& [k, u] : baseline) want_n += k.starts_with(h->name + "/");
    if (!eventually([&] { return healthy_on(net, *h).size() >= want_n; }, 90s, 500ms))
      violation(h->name + ": not every process healthy 90 s after the faults stopped: " +
                net.loom(*h, {"status", "--json"}, 30s).out);
  }
  for (const auto* site : {"north", "south"})
    if (!eventually([&] { return link_state(net, cloud, site) == "up"; }, 90s, 500ms))
      violation(std::string("site ") + site + "'s link is not up at the cloud 90 s after the faults stopped: " +
                link_state(net, cloud, site));
  for (auto& [rid, id] : job_of) {
    const std::string again = submit_at(net, cloud, rid, 30s);
    if (again.empty()) violation("submit " + rid + " gets no reply after the faults stopped");
    else if (!id.empty() && again != id) violation("submit " + rid + " named job " + id + ", its retry job " + again);
    if (id.empty()) id = again;
  }

  // Jobs: each once, each ends succeeded; a single-site one bitwise the
  // reference, a cross-site one with its global model published at the cloud.
  int succeeded = 0, cross_site_ok = 0;
  std::set<std::string> want_ids{ref_id};
  for (auto& [rid, id] : job_of) {
    if (id.empty()) continue;
    want_ids.insert(id);
    const json j = wait_job(net, cloud, id, 600s);
    const std::string st = j.value("state", "");
    if (st != "succeeded") {
      violation("job " + id + " (" + rid + ") " + (st.empty() ? "did not end within 600 s" : st) + ": " + j.dump());
      continue;
    }
    ++succeeded;
    if (rid.find("-diloco-") != std::string::npos) {
      const std::string ckpt = j["stages"][0].value("checkpoint", "");
      if (ckpt.empty() || !exists(net.seen_from_outside(cloud, ckpt)))
        violation("cross-site job " + id + " succeeded with no global model at the cloud: " + j.dump());
      else
        ++cross_site_ok;
    } else {
      lan_host& site = rid.find("-south-") != std::string::npos ? south : north;
      if (final_sha(net, site, j, "pretrain") != want.first || final_sha(net, site, j, "sft") != want.second)
        violation("job " + id + " on " + site.name + " succeeded with parameters unlike the uninterrupted reference's");
    }
  }
  // The trainers' losses at the cloud, and those a trainer back from a cut
  // link took back (its own word: silent, its loop on time).
  int lost = 0, taken_back = 0;
  for (auto& [rid, id] : job_of) {
    if (id.empty()) continue;
    for (auto& e : as_json(net.loom(cloud, {"job", "logs", id, "--json"}, 30s)).value("events", json::array())) {
      const std::string kind = e.value("kind", "");
      lost += kind == "requeued" && e.value("text", "").find(" lost") != std::string::npos;
      taken_back += kind == "cut_off";
    }
  }
  std::vector<std::string> listed;
  for (auto& j : as_json(net.loom(cloud, {"job", "list", "--json"}, 30s)).value("jobs", json::array()))
    listed.push_back(j.value("id", ""));
  for (const auto& v : job_list_violations(listed, want_ids)) violation(v);

  // The audit: every answered submit in its job's trail at the cloud; every
  // import reported done named in its site's chain; every host's chain verifies.
  for (auto& [rid, id] : job_of) {
    if (id.empty()) continue;
    bool found = false;
    for (auto& e : as_json(net.loom(cloud, {"audit", "trail", id, "--json"}, 30s)).value("events", json::array()))
      found = found || e.value("request_id", "") == rid;
    if (!found) violation("submit " + rid + " (job " + id + ") was answered but is not in the audit chain");
  }
  std::map<std::string, std::string> tails;
  for (auto* h : hosts) {
    tails[h->name] = net.loom(*h, {"audit", "tail", "--lines", "10000", "--json"}, 120s).out;
    auto v = net.loom(*h, {"audit", "verify"}, 120s);
    if (v.code != 0) violation(h->name + ": loom audit verify: " + v.out + v.err);
  }
  for (auto& [name, site] : imported) {
    if (tails[site->name].find("\"" + name + "\"") == std::string::npos &&
        tails["cloud"].find("\"" + name + "\"") == std::string::npos)
      violation("import of dataset " + name + " at " + site->name + " reported done but is in no audit chain");
    auto v = net.loom(*site, {"data", "verify", name}, 120s);
    if (v.code != 0) violation("dataset " + name + " (imported at " + site->name + ") does not verify: " + v.out + v.err);
  }

  // Every snapshot on every host verifies under that host's keys; no temporary file anywhere.
  int snapshots = 0;
  for (auto* h : hosts) {
    const std::string data = net.seen_from_outside(*h, h->data);
    process_keys_of keys(data);
    auto key = auth::load_token_key(layout::paths{data}.checkpoint_key());
    if (!key) {
      violation(h->name + ": no checkpoint key: " + key.err().to_string());
      continue;
    }
    for (auto& [dir, step] : snapshots_under(data)) {
      ++snapshots;
      for (auto& p : ckpt::verify_snapshot(dir, step, *key)) violation(h->name + ": snapshot " + dir + ": " + p);
    }
    for (auto& f : temp_files(data)) violation(h->name + ": temporary file left behind: " + f);
  }

  // Open files and memory back near their baseline.
  for (auto* h : hosts)
    for (auto& [name, pid] : healthy_on(net, *h)) {
      const std::string key = h->name + "/" + name;
      if (baseline.count(key))
        if (auto over = over_baseline(key, use_of(pid), baseline[key]); !over.empty()) violation(over);
    }

  if (!violations.empty()) {  // what the hosts said, for the one who reads the failure
    std::ostringstream diag;
    for (auto* h : hosts) {
      const layout::paths paths{net.seen_from_outside(*h, h->data)};
      for (const auto& name : {"watcher", "scheduler", "aggregator", "trainer", "ingest", "audit"}) {
        auto text = files::read_file(name == std::string("watcher") ? paths.watcher_log() : paths.log(name));
        if (!text) continue;
        diag << "--- " << h->name << "'s " << name << " log, last lines:\n" << last_lines(*text, 20) << "\n";
      }
    }
    MESSAGE(diag.str());
  }
  {
    std::lock_guard lock(ft.log.mu);
    std::ostringstream faults_text;
    for (auto& l : ft.log.lines) faults_text << "  " << l << "\n";
    MESSAGE("faults injected:\n" << faults_text.str());
    int total = 0;
    for (auto& [k, n] : ft.log.counts) total += n;
    std::printf("case=chaos_lan seed=%u seconds=%ld faulted_ms=%lld faults=%d kills=%d link_cuts=%d clock_jumps=%d "
                "fsync_windows=%d jobs=%zu succeeded=%d cross_site_ok=%d trainers_lost=%d losses_taken_back=%d imports=%d "
                "imports_ok=%zu reads=%d snapshots=%d violations=%zu\n",
                seed, seconds, static_cast<long long>(faulted_ms), total, ft.log.counts["kill"], ft.log.counts["link_cut"],
                ft.log.counts["clock"], ft.log.counts["fsync"], job_of.size(), succeeded, cross_site_ok, lost, taken_back, imports,
                imported.size(), reads, snapshots, violations.size());
    std::fflush(stdout);
  }
  CHECK(violations.empty());
}
