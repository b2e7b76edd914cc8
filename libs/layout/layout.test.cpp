#include "libs/layout/layout.hpp"

#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

TEST_CASE("the endpoints file round-trips every field") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  std::string path = std::string(tmpl) + "/endpoints.json";
  loom::layout::endpoints e;
  e.zone = "edge-a";
  e.watcher_pid = 42;
  e.services["audit"] = {"tcp://127.0.0.1:5000", "127.0.0.1:5001", "tcp://127.0.0.1:5002", 77};
  e.services["scheduler"] = {"tcp://127.0.0.1:5003", "127.0.0.1:5004", "", 78};
  REQUIRE(loom::layout::write_endpoints(path, e).ok());
  auto back = loom::layout::read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->zone == "edge-a");
  CHECK(back->watcher_pid == 42);
  REQUIRE(back->find("audit"));
  CHECK(back->find("audit")->pull == "tcp://127.0.0.1:5002");
  CHECK(back->find("scheduler")->pid == 78);
  CHECK(back->find("trainer") == nullptr);
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("a damaged endpoints file is corruption, a missing one not_found") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  std::string path = std::string(tmpl) + "/endpoints.json";
  CHECK(loom::layout::read_endpoints(path).code() == loom::errc::not_found);
  REQUIRE(loom::files::write_atomic(path, "{\"services\": [1,", 0644).ok());
  auto r = loom::layout::read_endpoints(path);
  CHECK(r.code() == loom::errc::corruption);
  CHECK(r.err().message.find(path) != std::string::npos);
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("the six services start audit first and map to their binaries") {
  CHECK(loom::layout::service_names.front() == "audit");
  CHECK(loom::layout::is_service("trainer"));
  CHECK_FALSE(loom::layout::is_service("loom"));
  CHECK(loom::layout::binary_of("trainer") == "loom-trainer");
}

TEST_CASE("extra trainers are named trainer-K and map back to the trainer kind") {
  using loom::layout::service_kind;
  CHECK(service_kind("trainer") == "trainer");
  CHECK(service_kind("audit") == "audit");
  CHECK(service_kind("trainer-2") == "trainer");
  CHECK(service_kind("trainer-64") == "trainer");
  CHECK(service_kind("trainer-1") == "");   // instance 1 is plain "trainer"
  CHECK(service_kind("trainer-02") == "");  // one name per instance
  CHECK(service_kind("trainer-") == "");
  CHECK(service_kind("trainer-2x") == "");
  CHECK(service_kind("trainers-2") == "");
  CHECK(service_kind("loom") == "");
  CHECK(loom::layout::instance_name("trainer", 1) == "trainer");
  CHECK(loom::layout::instance_name("trainer", 3) == "trainer-3");

  loom::layout::endpoints e;
  CHECK(loom::layout::process_names(e) ==
        std::vector<std::string>{"audit", "scheduler", "ingest", "trainer", "aggregator", "console"});
  e.trainers = 3;
  CHECK(loom::layout::process_names(e) == std::vector<std::string>{"audit", "scheduler", "ingest", "trainer", "trainer-2",
                                                                   "trainer-3", "aggregator", "console"});
}

TEST_CASE("the trainer count round-trips and defaults to one in files written before it existed") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  std::string path = std::string(tmpl) + "/endpoints.json";
  loom::layout::endpoints e;
  e.trainers = 3;
  e.services["trainer-3"] = {"tcp://127.0.0.1:5010", "127.0.0.1:5011", "", 91};
  REQUIRE(loom::layout::write_endpoints(path, e).ok());
  auto back = loom::layout::read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->trainers == 3);
  REQUIRE(back->find("trainer-3"));
  CHECK(back->find("trainer-3")->rpc == "tcp://127.0.0.1:5010");
  CHECK(back->find("trainer-3")->pid == 91);

  REQUIRE(loom::files::write_atomic(path, R"({"version": 1, "zone": "local", "watcher_pid": 0, "services": {}})", 0644)
              .ok());
  auto old = loom::layout::read_endpoints(path);
  REQUIRE(old.ok());
  CHECK(old->trainers == 1);

  REQUIRE(loom::files::write_atomic(path, R"({"trainers": 0, "services": {}})", 0644).ok());
  CHECK(loom::layout::read_endpoints(path).code() == loom::errc::corruption);
  REQUIRE(loom::files::write_atomic(path, R"({"trainers": "three", "services": {}})", 0644).ok());
  CHECK(loom::layout::read_endpoints(path).code() == loom::errc::corruption);
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("import roots round-trip through the endpoints file and a file without them has none") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  std::string path = std::string(tmpl) + "/endpoints.json";
  loom::layout::endpoints e;
  e.import_roots = {"/srv/corpus", "/mnt/data"};
  REQUIRE(loom::layout::write_endpoints(path, e).ok());
  auto back = loom::layout::read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->import_roots == std::vector<std::string>{"/srv/corpus", "/mnt/data"});
  REQUIRE(loom::files::write_atomic(path, "{\"services\": {}}", 0644).ok());
  back = loom::layout::read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->import_roots.empty());
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("an import root must be an existing directory beside the data dir, never around or inside it") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string base = std::filesystem::canonical(tmpl).string();
  std::filesystem::create_directories(base + "/data/keys");
  std::filesystem::create_directories(base + "/corpus");
  const loom::layout::paths p{base + "/data"};
  using loom::layout::check_import_root;
  CHECK(check_import_root(p, base + "/corpus").ok());
  for (const std::string& bad : {std::string("relative/dir"), base + "/missing", base, std::string("/"), base + "/data",
                                base + "/data/keys"}) {
    auto st = check_import_root(p, bad);
    CHECK_MESSAGE(st.code() == loom::errc::invalid_argument, bad);
    if (!st.ok()) CHECK(st.err().message.find(bad) != std::string::npos);
  }
  // Before the first `loom up` the data dir does not exist yet: still judged by where it will be.
  CHECK(check_import_root(loom::layout::paths{base + "/new/data"}, base).code() == loom::errc::invalid_argument);
  CHECK(check_import_root(loom::layout::paths{base + "/new/data"}, base + "/corpus").ok());
  loom::layout::endpoints e;
  e.import_roots = {base + "/corpus", base, base + "/missing"};
  std::vector<std::string> skipped;
  CHECK(loom::layout::import_roots(p, e, &skipped) ==
        std::vector<std::string>{base + "/data/imports", base + "/corpus"});
  CHECK(skipped.size() == 2);
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("the watcher's restart count and last exit round-trip, and are absent from a fresh entry") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  std::string path = std::string(tmpl) + "/endpoints.json";
  loom::layout::endpoints e;
  e.services["trainer"] = {"tcp://127.0.0.1:5010", "127.0.0.1:5011", "", 91, 2, "killed by signal 9",
                           "loom-trainer: serving\nbye"};
  e.services["audit"] = {"tcp://127.0.0.1:5000", "127.0.0.1:5001", "tcp://127.0.0.1:5002", 90};
  REQUIRE(loom::layout::write_endpoints(path, e).ok());
  auto back = loom::layout::read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->find("trainer")->restarts == 2);
  CHECK(back->find("trainer")->last_exit == "killed by signal 9");
  CHECK(back->find("trainer")->last_error == "loom-trainer: serving\nbye");
  CHECK(back->find("audit")->restarts == 0);
  CHECK(back->find("audit")->last_exit.empty());
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("find_snapshot finds a published step directory and ignores unpublished ones") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string jobs = std::string(tmpl) + "/jobs";
  CHECK(loom::layout::find_snapshot(jobs) == "");  // no such directory
  std::filesystem::create_directories(jobs + "/7/pretrain/checkpoints/.tmp-step-000020");
  REQUIRE(loom::files::write_atomic(jobs + "/7/pretrain/checkpoints/.tmp-step-000020/MANIFEST.json", "{}").ok());
  std::filesystem::create_directories(jobs + "/7/pretrain/checkpoints/step-000010");  // no manifest: not published
  CHECK(loom::layout::find_snapshot(jobs) == "");
  REQUIRE(loom::files::write_atomic(jobs + "/7/pretrain/checkpoints/step-000010/MANIFEST.json", "{}").ok());
  CHECK(loom::layout::find_snapshot(jobs) == jobs + "/7/pretrain/checkpoints/step-000010");
  CHECK(loom::layout::find_snapshot(jobs, 2) == "");  // deeper than asked
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("an edge site runs no scheduler, aggregator or console and reaches the cloud's with keys/cloud") {
  loom::layout::endpoints e;
  e.role = "site";
  e.zone = "north";
  e.trainers = 2;
  CHECK(loom::layout::process_names(e) == std::vector<std::string>{"audit", "ingest", "trainer", "trainer-2"});
  const loom::layout::paths p{"/d"};
  CHECK(loom::layout::reach(p, e, "scheduler").key_dir == "/d/keys/cloud");
  CHECK(loom::layout::reach(p, e, "aggregator").token_file == "/d/keys/cloud/token");
  CHECK(loom::layout::reach(p, e, "ingest").key_dir == "/d/keys/curve");
  CHECK(loom::layout::reach(p, e, "ingest").token_file.empty());
  loom::layout::endpoints cloud;
  CHECK(loom::layout::reach(p, cloud, "scheduler").key_dir == "/d/keys/curve");
  CHECK(loom::layout::process_names(cloud).size() == 6);  // the console is the cloud's
}

TEST_CASE("a split cloud runs only the services its only names, kept in the endpoints file") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string path = std::string(tmpl) + "/endpoints.json";
  loom::layout::endpoints e;
  e.only = {"aggregator", "ingest"};
  CHECK(loom::layout::process_names(e) == std::vector<std::string>{"ingest", "aggregator"});
  CHECK(e.runs_here("ingest"));
  CHECK_FALSE(e.runs_here("scheduler"));
  CHECK_FALSE(e.runs_here("trainer"));
  REQUIRE(loom::layout::write_endpoints(path, e).ok());
  auto back = loom::layout::read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->only == e.only);
  loom::layout::endpoints all;  // no "only" written: every service
  REQUIRE(loom::layout::write_endpoints(path, all).ok());
  CHECK(loom::files::read_file(path)->find("\"only\"") == std::string::npos);
  CHECK(loom::layout::read_endpoints(path)->only.empty());
  REQUIRE(loom::files::write_atomic(path, "{\"services\": {}, \"only\": [\"ingest\", \"gpu\"]}", 0600).ok());
  auto bad = loom::layout::read_endpoints(path);
  CHECK(bad.code() == loom::errc::corruption);
  CHECK(bad.err().message.find("gpu") != std::string::npos);
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("no output lands in a data dir's keys, tokens, store or job outputs, whatever the flags") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string base = fs::canonical(tmpl).string(), data = base + "/data", other = base + "/other";
  REQUIRE(loom::files::make_dirs(data + "/keys/curve").ok());
  REQUIRE(loom::files::write_atomic(data + "/keys/token.key", "k").ok());
  REQUIRE(loom::files::make_dirs(other + "/keys/curve").ok());  // another data dir than the command's
  REQUIRE(loom::files::make_dirs(data + "/imports").ok());
  const loom::layout::paths p{data};
  loom::files::output_rules force;
  force.force = true;
  for (const std::string& bad :
       {data + "/keys/token.key", data + "/keys/curve/new.key", data + "/admin.token", data + "/loom.db",
        data + "/loom.db-wal", data + "/endpoints.json", data + "/jobs/job-000001/x", data + "/spool/cli/x",
        data + "/scheduler/x", data + "/trainer-2/x", data + "/.trainer.lock", data, other + "/keys/token.key",
        other + "/admin.token", data + "/imports/../keys/x"}) {
    auto st = loom::layout::check_output(p, bad, force);
    INFO(bad << ": " << (st ? std::string("ok") : st.err().message));
    CHECK(st.code() == loom::errc::permission_denied);
  }
  // A link that leads into keys/ is refused too.
  REQUIRE(::symlink((data + "/keys/token.key").c_str(), (base + "/tok.json").c_str()) == 0);
  CHECK(loom::layout::check_output(p, base + "/tok.json", force).code() == loom::errc::permission_denied);
  auto msg = loom::layout::check_output(p, data + "/keys/token.key", force);
  CHECK(msg.err().message.find("lies in " + data + "/keys") != std::string::npos);
  CHECK(msg.err().message.find("--force or not") != std::string::npos);
  // The owner's parts: imports/, a new name beside the services' entries, anywhere else.
  for (const std::string& good : {data + "/imports/tok.json", data + "/eval-0", data + "/out-hf", base + "/tok.json2"})
    CHECK(loom::layout::check_output(p, good, force).ok());
  // The command's data dir counts before it exists (a first `loom up` comes later).
  const loom::layout::paths fresh{base + "/not-yet"};
  CHECK(loom::layout::check_output(fresh, base + "/not-yet/keys/token.key", force).code() ==
        loom::errc::permission_denied);
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("scheduler replicas are processes scheduler, scheduler-2 ..., their count round-trips, and clients of the scheduler get every replica in order, on this host or others") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  std::string path = std::string(tmpl) + "/endpoints.json";
  loom::layout::endpoints e;
  e.scheduler_replicas = 3;
  const auto names = loom::layout::process_names(e);
  CHECK(std::count(names.begin(), names.end(), "scheduler-2") == 1);
  CHECK(std::count(names.begin(), names.end(), "scheduler-3") == 1);
  CHECK(std::count(names.begin(), names.end(), "scheduler-4") == 0);
  e.services["scheduler-3"] = {"tcp://127.0.0.1:5030", "127.0.0.1:5031", "", 0};
  e.services["scheduler"] = {"tcp://127.0.0.1:5010", "127.0.0.1:5011", "", 0};
  e.services["scheduler-2"] = {"tcp://127.0.0.1:5020", "127.0.0.1:5021", "", 0};
  e.services["trainer"] = {"tcp://127.0.0.1:5040", "127.0.0.1:5041", "", 0};
  e.services["trainer-2"] = {"tcp://127.0.0.1:5050", "127.0.0.1:5051", "", 0};
  REQUIRE(loom::layout::write_endpoints(path, e).ok());
  auto back = loom::layout::read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->scheduler_replicas == 3);
  CHECK(back->rpc_targets("scheduler") ==
        std::vector<std::string>{"tcp://127.0.0.1:5010", "tcp://127.0.0.1:5020", "tcp://127.0.0.1:5030"});
  // One process when asked by name, and trainers are never a replica set.
  CHECK(back->rpc_targets("scheduler-2") == std::vector<std::string>{"tcp://127.0.0.1:5020"});
  CHECK(back->rpc_targets("trainer") == std::vector<std::string>{"tcp://127.0.0.1:5040"});
  CHECK(back->rpc_targets("nosuch").empty());

  // Replica 2 of 3 on this host (`--only scheduler --scheduler-replica 2`):
  // it runs scheduler-2 alone; the others come from peers.json by process
  // name, a peer's entry for scheduler-2 itself never replaces this host's.
  e.only = {"scheduler"};
  e.scheduler_replica = 2;
  const auto mine = loom::layout::process_names(e);
  CHECK(mine == std::vector<std::string>{"scheduler-2"});
  CHECK(e.runs_process("scheduler-2"));
  CHECK(!e.runs_process("scheduler"));
  CHECK(!e.runs_process("trainer"));
  e.services.erase("scheduler");
  e.services.erase("scheduler-3");
  REQUIRE(loom::layout::write_endpoints(path, e).ok());
  loom::layout::endpoints peers;
  peers.only = {"scheduler", "audit"};
  peers.services["scheduler"] = {"tcp://10.0.0.1:7400", "10.0.0.1:7401", "", 0};
  peers.services["scheduler-2"] = {"tcp://10.0.0.9:7400", "10.0.0.9:7401", "", 0};  // stale: this host's
  peers.services["scheduler-3"] = {"tcp://10.0.0.3:7400", "10.0.0.3:7401", "", 0};
  peers.services["audit"] = {"tcp://10.0.0.1:7402", "10.0.0.1:7403", "tcp://10.0.0.1:7404", 0};
  REQUIRE(loom::layout::write_endpoints(std::string(tmpl) + "/peers.json", peers).ok());
  back = loom::layout::read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->scheduler_replica == 2);
  CHECK(back->rpc_targets("scheduler") ==
        std::vector<std::string>{"tcp://10.0.0.1:7400", "tcp://127.0.0.1:5020", "tcp://10.0.0.3:7400"});
  CHECK(back->find("audit")->pull == "tcp://10.0.0.1:7404");
  REQUIRE(loom::files::write_atomic(path, R"({"scheduler_replicas": 2, "scheduler_replica": 3, "services": {}})", 0644).ok());
  CHECK(loom::layout::read_endpoints(path).code() == loom::errc::corruption);

  REQUIRE(loom::files::write_atomic(path, R"({"scheduler_replicas": 9, "services": {}})", 0644).ok());
  CHECK(loom::layout::read_endpoints(path).code() == loom::errc::corruption);
  REQUIRE(loom::files::write_atomic(path, R"({"services": {}})", 0644).ok());
  CHECK(loom::layout::read_endpoints(path)->scheduler_replicas == 1);
  std::filesystem::remove_all(tmpl);
}
