// Cross-process, on loopback (issue 15 items 1 and 6): a cloud (`loom up`,
// data dir C) and two edge sites (`loom up --site north|south --cloud EP
// --enrol-token T`, data dirs N and S: each its own store, audit, ingest and
// one trainer in zone north|south, no scheduler or aggregator). Each site
// imports its own text under the same dataset name. `pretrain-diloco-tiny`
// with diloco.sites = ["north", "south"] is submitted to the cloud: member r
// is placed on site r's trainer, which trains on its own data and syncs with
// the cloud's aggregator. Then: the job succeeded, each site's stage files are
// in its own data dir, no file of the cloud's data dir is a site's shard or
// holds its text, the cloud's scheduler stopped (until both sites said they
// lost it) and then killed mid-run leaves the sites training (they find it
// again), `loom site list` shows both sites with their trainer, link state and
// datasets, and after `loom site revoke south` south's trainer is refused by
// the cloud scheduler. Every step waits on what the processes say, never on
// the clock (issue 24 item 18). And at a site, the `loom` commands that ask the
// cloud (status, job list, site list, model list, job submit) reach it.
#include "tests/support/at_rest.hpp"
#include "tests/support/edge_sites.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <ctime>
#include <filesystem>
#include <cmath>
#include <set>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> names{"north", "south"};
const std::vector<std::string> corpora{"GPL-3", "GPL-2"};

}  // namespace

TEST_CASE("a cloud and two edge sites run a diloco job on each site's own data, and no site data reaches the cloud") {
  const auto t0 = std::chrono::steady_clock::now();
  cluster c;
  REQUIRE(c.up);
  std::vector<std::unique_ptr<edge_site>> sites;
  for (std::size_t s = 0; s < names.size(); ++s) sites.push_back(start_edge_site(c, names[s], corpora[s]));
  MESSAGE("cloud and sites up, data imported: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");

  auto sub = loom_json(c.home.path(), {"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                                       "diloco.sites=[\"north\", \"south\"]", "--set", "dataset=text", "--set",
                                       "pretrain.steps=16"});
  REQUIRE(sub.contains("id"));
  const std::string id = sub["id"].get<std::string>();
  // The cloud goes away mid-run (its scheduler stopped for 4 s, then killed
  // with -9 and started again by its watcher on the same port): the sites
  // train on and find it again.
  json j;
  REQUIRE(eventually(
      [&] {
        j = loom_json(c.home.path(), {"job", "show", id});
        return j.contains("stages") && j["stages"][0].value("step", 0) >= 4;
      },
      90s));
  c.refresh();
  const long cloud_scheduler = c.ep("scheduler").pid;
  // Each step waits on what the sites say, not on the clock: under load a
  // site may take longer than any fixed interval to notice.
  auto trainer_log = [&](std::size_t s) {
    auto t = files::read_file(sites[s]->home.path() + "/logs/trainer.log");
    return t ? *t : std::string();
  };
  std::vector<std::size_t> log_at;  // where in each site's trainer log the next line is looked for
  for (std::size_t s = 0; s < sites.size(); ++s) log_at.push_back(trainer_log(s).size());
  auto every_site_says = [&](const std::string& what) {
    std::vector<std::size_t> found;
    for (std::size_t s = 0; s < sites.size(); ++s) {
      const auto at = trainer_log(s).find(what, log_at[s]);
      if (at == std::string::npos) return false;
      found.push_back(at + what.size());
    }
    log_at = found;
    return true;
  };
  REQUIRE(::kill(static_cast<pid_t>(cloud_scheduler), SIGSTOP) == 0);  // a cut: no answers until both sites noticed
  const bool noticed = eventually([&] { return every_site_says("lost the cloud scheduler"); }, 30s);
  REQUIRE(::kill(static_cast<pid_t>(cloud_scheduler), SIGCONT) == 0);
  REQUIRE_MESSAGE(noticed, "the sites did not notice the cloud scheduler gone within 30 s");
  REQUIRE(eventually([&] { return every_site_says("answers again"); }, 30s));
  REQUIRE(::kill(static_cast<pid_t>(cloud_scheduler), SIGKILL) == 0);  // then a crash: the watcher restarts it
  j = wait_job_done(c.home.path(), id, 150s);
  REQUIRE_MESSAGE(j.value("state", "") == "succeeded", j.dump());
  const json& pre = j["stages"][0];
  CHECK(pre["step"] == 16);
  CHECK(std::isfinite(pre["loss"].get<double>()));
  // Member r ran on site r's trainer, and wrote under that site's data dir.
  REQUIRE(pre["members"].size() == 2);
  for (std::size_t s = 0; s < names.size(); ++s) {
    CHECK(pre["members"][s].get<std::string>().rfind("trainer@", 0) == 0);
    auto log = files::read_file(sites[s]->home.path() + "/logs/trainer.log");
    REQUIRE(log.ok());
    CHECK_MESSAGE(layout::find_snapshot(sites[s]->home.path() + "/jobs/" + id + "/pretrain") != "",
                  names[s] << "'s trainer log:\n" << *log << "\njob: " << loom_json(c.home.path(), {"job", "logs", id}).dump());
    CHECK(log->find("diloco " + names[s] + ": joined") != std::string::npos);
  }
  // Both sites noticed the cloud's scheduler gone and back, and kept training meanwhile.
  c.refresh();
  CHECK(c.ep("scheduler").pid != cloud_scheduler);
  for (auto& st : sites) {
    auto log = files::read_file(st->home.path() + "/logs/trainer.log");
    REQUIRE(log.ok());
    const auto lost = log->find("lost the cloud scheduler");
    CHECK(lost != std::string::npos);
    CHECK(log->find("answers again", lost) != std::string::npos);
  }

  // The stage's model is the aggregator's global θ, in the cloud's own stage
  // dir (signed with the cloud's key), the same tensors as member 0's final snapshot.
  const std::string ckpt_dir = pre["checkpoint"].get<std::string>();
  CHECK(ckpt_dir == c.home.path() + "/jobs/" + id + "/pretrain/checkpoints/step-000016");
  // Both sealed at rest, each under its own deployment's keys: compared as plaintext.
  CHECK(atrest::is_sealed_file(ckpt_dir + "/model.safetensors"));
  auto cloud_model = atrest::read_object(ckpt_dir + "/model.safetensors", test::keys_of(c.home.path()).get());
  const std::string site_model = test::plain_file(
      sites[0]->home.path() + "/jobs/" + id + "/pretrain/checkpoints/step-000016/model.safetensors", sites[0]->home.path());
  REQUIRE(cloud_model.ok());
  CHECK(*cloud_model == site_model);
  auto models = loom_json(c.home.path(), {"model", "list"});
  CHECK_MESSAGE(models.dump().find(ckpt_dir) != std::string::npos, models.dump());

  // Data stays home: no file of the cloud is one of a site's dataset files,
  // and none holds a line of a site's text — compared as plaintext, each
  // file unsealed under its own deployment's keys (both seal at rest).
  std::set<std::string> site_files;
  for (auto& st : sites) {
    const auto keys = test::keys_of(st->home.path());
    for (const auto& f : files_under(st->home.path() + "/datasets"))
      if (auto bytes = atrest::read_object(f, keys.get()); bytes && bytes->size() > 64) site_files.insert(*bytes);
  }
  REQUIRE(!site_files.empty());
  const std::vector<std::string> lines{"Everyone is permitted to copy and distribute verbatim copies",
                                       "When we speak of free software, we are referring to freedom"};
  std::size_t scanned = 0;
  const auto cloud_keys = test::keys_of(c.home.path());
  for (const auto& f : files_under(c.home.path())) {
    auto bytes = atrest::read_object(f, cloud_keys.get());
    if (!bytes) continue;
    ++scanned;
    CHECK_MESSAGE(!site_files.count(*bytes), f << " is a site's dataset file");
    for (const auto& l : lines) CHECK_MESSAGE(bytes->find(l) == std::string::npos, f << " holds site text");
  }
  MESSAGE(scanned << " cloud files scanned, " << site_files.size() << " site dataset files");

  // `loom site list`: both sites with their trainer, link state (RTT and the
  // uplink their diloco trainer measured) and datasets.
  // Waited for as a whole: a site whose last heartbeat is late (a loaded
  // machine) shows "down" until the next one arrives.
  json list;
  const bool reported = eventually(
      [&] {
        list = loom_json(c.home.path(), {"site", "list"});
        int good = 0;
        for (const auto& s : list.value("sites", json::array())) {
          const std::string state = s["link"].is_object() ? s["link"].value("state", "") : "";
          good += !s["trainers"].empty() && s["link"].is_object() && s["datasets"].is_array() &&
                  !s["datasets"].empty() && s["datasets"][0].value("name", "") == "text" &&
                  s["datasets"][0].value("bytes", 0) > 0 && s["link"].value("bandwidth_bytes_per_s", 0.0) > 0.0 &&
                  (state == "up" || state == "degraded");
        }
        return good == 2;
      },
      30s);
  CHECK_MESSAGE(reported, list.dump());
  for (const auto& s : list.value("sites", json::array())) {
    CHECK(s["state"] == "enrolled");
    CHECK(s["link"].value("rtt_ms", 0.0) > 0.0);
    CHECK(s["link"].value("bandwidth_bytes_per_s", 0.0) > 0.0);  // measured by its trainer's deltas
    MESSAGE(s.value("name", "") << "'s link: " << s["link"].dump());
    const std::string state = s["link"].value("state", "");
    CHECK_MESSAGE((state == "up" || state == "degraded"), state);  // degraded: the outage above is recent
    CHECK(s.value("last_contact_unix_ns", std::uint64_t{0}) > 0);
  }

  // A revoked site's trainer is refused by the cloud (its open connection too).
  const std::string south_log = sites[1]->home.path() + "/logs/trainer.log";
  const std::size_t before = files::read_file(south_log)->size();
  REQUIRE(run_loom(c.home.path(), {"site", "revoke", "south", "--reason", "test"}, 30s).code == 0);
  // Waited for: the refusal naming the permission (a heartbeat that timed out
  // under load may first log "not registered ...: unavailable").
  std::string refusal;
  const bool refused = eventually(
      [&] {
        auto t = files::read_file(south_log);
        for (auto at = t ? t->find("not registered with the cloud scheduler", before) : std::string::npos;
             at != std::string::npos; at = t->find("not registered with the cloud scheduler", at + 1)) {
          refusal = t->substr(at, t->find('\n', at) - at);
          if (refusal.find("permission") != std::string::npos) return true;
        }
        return false;
      },
      20s);
  MESSAGE("south after its revocation: " << refusal);
  CHECK_MESSAGE(refused, "last refusal: " << refusal);
  MESSAGE("total " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
}

namespace {

// An operator token of `tenant` for the deployment at `home` (its own token key).
std::string tenant_token(const std::string& home, const std::string& tenant) {
  layout::paths p{home};
  auto key = auth::load_token_key(p.token_key());
  REQUIRE(key.ok());
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const auto epoch = auth::read_epoch(p.epoch());
  auto t = auth::issue_token(
      auth::claims{tenant + "-ops", auth::role::operator_, {"*"}, now + 900, epoch ? *epoch : 0, now, tenant}, *key);
  REQUIRE(t.ok());
  return *t;
}

}  // namespace

TEST_CASE("a cloud job of tenant acme trains at an edge site on the site's tenant-acme dataset of that name, not on "
          "the site's default one") {
  cluster c;
  REQUIRE(c.up);
  auto north = start_edge_site(c, "north", "GPL-3");  // the site's default tenant's "text"
  const std::string site = north->home.path();
  auto imp = run_loom(site, {"data", "import", std::string(licences) + "/GPL-2", "--dataset", "text", "--token",
                             tenant_token(site, "acme")},
                      120s);
  REQUIRE_MESSAGE(imp.code == 0, imp.err);
  const std::string acme_text = site + "/datasets/.tenant-acme/text";
  REQUIRE(*files::read_file(acme_text + "/manifest.json") != *files::read_file(site + "/datasets/text/manifest.json"));

  auto sub = loom_json(c.home.path(), {"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                                       "diloco.sites=[\"north\"]", "--set", "dataset=text", "--set", "pretrain.steps=16",
                                       "--token", tenant_token(c.home.path(), "acme")});
  REQUIRE(sub.contains("id"));
  auto j = wait_job_done(c.home.path(), sub["id"].get<std::string>(), 150s);
  REQUIRE_MESSAGE(j.value("state", "") == "succeeded", j.dump());
  // The site's trainer fetched tenant acme's text from the site's ingest, and never the default's.
  const std::string fetched = site + "/trainer/datasets/.tenant-acme/text";
  REQUIRE(fs::exists(fetched + "/manifest.json"));
  CHECK(*files::read_file(fetched + "/manifest.json") == *files::read_file(acme_text + "/manifest.json"));
  CHECK_FALSE(fs::exists(site + "/trainer/datasets/text"));
}

TEST_CASE("at an edge site loom status, job list, site list, model list and job submit reach the cloud's scheduler") {
  cluster c;
  REQUIRE(c.up);
  auto north = start_edge_site(c, "north", "GPL-3");
  const std::string site = north->home.path();
  c.refresh();

  // status: the site's own processes, then the cloud's scheduler and aggregator
  // answering from the cloud's pids (reached with keys/cloud/ and the site's token).
  auto st = run_loom(site, {"status", "--json"}, 60s);
  INFO("status: " << st.out << st.err);
  CHECK(st.code == 0);
  auto sj = json::parse(st.out, nullptr, false);
  REQUIRE(sj.is_object());
  std::set<std::string> cloud_rows;
  for (const auto& s : sj.value("services", json::array())) {
    CHECK_MESSAGE(s.value("healthy", false), s.dump());
    if (!s.value("cloud", false)) continue;
    cloud_rows.insert(s.value("name", ""));
    CHECK(s.value("pid", 0L) == c.ep(s.value("name", "")).pid);
  }
  CHECK(cloud_rows == std::set<std::string>{"scheduler", "aggregator"});
  CHECK(sj.value("roster_error", "").find("no reply") == std::string::npos);

  // With the site's own token (keys/cloud/token): the cloud answers, whatever it
  // allows a site token — never "no reply" (exit 4).
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"job", "list"}, {"site", "list"}, {"model", "list"}}) {
    auto r = run_loom(site, cmd, 30s);
    INFO(cmd[0] << " " << cmd[1] << ": " << r.out << r.err);
    CHECK((r.code == 0 || r.code == 3));
    CHECK(r.err.find("no reply") == std::string::npos);
  }
  // With a token the cloud's admin issued (--token): the cloud's own answers.
  const std::string admin = c.admin();
  auto jobs = loom_json(site, {"job", "list", "--token", admin});
  CHECK(jobs.contains("jobs"));
  auto sites = loom_json(site, {"site", "list", "--token", admin});
  bool listed = false;
  for (const auto& s : sites.value("sites", json::array())) listed |= s.value("name", "") == "north";
  CHECK_MESSAGE(listed, sites.dump());
  int code = -1;
  auto models = loom_json(site, {"model", "list", "--token", admin}, 30s, &code);
  CHECK(code == 0);
  // The site's own admin token is never handed to the cloud, even when given.
  auto own = files::read_file(site + "/admin.token");
  REQUIRE(own.ok());
  auto leak = run_loom(site, {"job", "list", "--token", own->substr(0, own->find('\n'))}, 30s);
  CHECK(leak.code == 1);
  CHECK(leak.err.find("is this site's own") != std::string::npos);
  auto sub = run_loom(site, {"job", "submit", "--template", "pipeline-test", "--set", "train.steps=0", "--token", admin},
                      30s);
  INFO("submit: " << sub.out << sub.err);
  CHECK(sub.code == 1);  // the cloud scheduler's refusal of the values, not "no reply"
  CHECK(sub.err.find("train.steps") != std::string::npos);
  CHECK(sub.err.find("no reply") == std::string::npos);
}
