// The ingest logic over a real catalogue (SQLite in a temp dir) and a small
// dataset of real shards: rejects by the page, damaged datasets in status and
// list, `verify`, and the refusals of an import (nodes, roots) with their audit payload.
#include "services/ingest/ingest_logic.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/shards/writer.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "loom/v1/ingest.pb.h"
#include "services/ingest/importer/catalog.hpp"
#include "services/ingest/importer/rejects.hpp"
#include "services/ingest/sync_service.hpp"
#include "services/ingest/tasks.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <thread>

using namespace loom;
using namespace loom::ingest;
namespace fs = std::filesystem;

namespace {

// <data>/datasets/d: three shards and 120 rejects, recorded in the catalogue.
struct fixture {
  files::temp_dir data{"loom-ingest-logic"};
  std::string root = data.path() + "/datasets", dir = root + "/d";
  std::unique_ptr<store::database> db;
  std::shared_ptr<task_runner> tasks;
  std::vector<std::string> roster{"trainer@h1"};
  std::optional<ingest_logic> logic;

  fixture() {
    shards::writer_options w;
    w.dir = dir;
    w.target_bytes = 4096;
    auto sw = shards::shard_writer::create(w);
    REQUIRE(sw.ok());
    for (std::uint32_t i = 0; i < 60; ++i) REQUIRE(sw->append(std::vector<std::uint32_t>(100, 1000 + i)).ok());
    auto m = sw->finish();
    REQUIRE(m.ok());
    REQUIRE(m->shards.size() >= 3);
    REQUIRE(shards::write_manifest(dir, *m).ok());
    auto rj = rejects_writer::create(dir + "/rejects.jsonl");
    REQUIRE(rj.ok());
    for (int i = 0; i < 120; ++i) REQUIRE(rj->add("reader", "binary_content", "in/f" + std::to_string(i), 0, "x").ok());
    REQUIRE(rj->close().ok());
    const std::string url = data.path() + "/loom.db";
    auto opened = store::database::open(url);
    REQUIRE(opened.ok());
    db = std::move(*opened);
    REQUIRE(store::migrate(*db, ingest_migrations()).ok());
    task_runner_options o;
    o.datasets_root = root;
    o.database_url = url;
    o.import_roots = {data.path() + "/imports"};
    fs::create_directories(data.path() + "/imports/corpus");
    tasks = std::make_shared<task_runner>(std::move(o));
    REQUIRE(tasks->record_dataset_dir("default", "d", "00000000000000a1").ok());
    ingest_parts p;
    p.tasks = tasks;
    p.db = db.get();
    p.datasets_root = root;
    p.trainer_nodes = [this]() -> result<std::vector<std::string>> {
      if (roster.empty()) return make_error(errc::unavailable, "cannot check nodes: the scheduler is down");
      return roster;
    };
    logic.emplace(std::move(p));
  }

  runtime::handled call(const google::protobuf::Message& m) {
    runtime::call_context ctx;
    ctx.principal = "tester";
    return logic->handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), ctx);
  }
  // As a caller of `tenant` with `role` over the CURVE key `peer`.
  runtime::handled call_as(const google::protobuf::Message& m, const std::string& tenant,
                           const std::string& role = "operator", const std::string& peer = "client") {
    runtime::call_context ctx;
    ctx.principal = tenant + "-" + role;
    ctx.role = role;
    ctx.tenant = tenant;
    ctx.peer = peer;
    return logic->handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), ctx);
  }
  template <class Rep>
  Rep ok_as(const google::protobuf::Message& m, const std::string& tenant, const std::string& role = "operator",
            const std::string& peer = "client") {
    auto h = call_as(m, tenant, role, peer);
    REQUIRE_MESSAGE(h.code == errc::ok, h.message);
    auto r = runtime::parse_as<Rep>(h.body);
    REQUIRE(r.ok());
    return *r;
  }
  // Waits for task `id` (as seen by `tenant`) to end.
  loom::v1::TaskInfo wait_task(const std::string& id, const std::string& tenant) {
    loom::v1::GetTaskRequest get;
    get.set_id(id);
    for (int i = 0; i < 3000; ++i) {
      auto now = ok_as<loom::v1::GetTaskReply>(get, tenant).task();
      if (now.state() == "succeeded" || now.state() == "failed" || now.state() == "cancelled") return now;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("task " << id << " did not end");
    return {};
  }
  template <class Rep>
  Rep ok(const google::protobuf::Message& m) {
    auto h = call(m);
    REQUIRE_MESSAGE(h.code == errc::ok, h.message);
    auto r = runtime::parse_as<Rep>(h.body);
    REQUIRE(r.ok());
    return *r;
  }
  loom::v1::DatasetStatusReply status() {
    loom::v1::DatasetStatusRequest q;
    q.set_name("d");
    return ok<loom::v1::DatasetStatusReply>(q);
  }
  loom::v1::TaskInfo verify() {
    loom::v1::VerifyDatasetRequest q;
    q.set_name("d");
    auto t = ok<loom::v1::VerifyDatasetReply>(q).task();
    CHECK(t.id().starts_with("ver-"));
    loom::v1::GetTaskRequest get;
    get.set_id(t.id());
    for (int i = 0; i < 3000; ++i) {
      auto now = ok<loom::v1::GetTaskReply>(get).task();
      if (now.state() == "succeeded" || now.state() == "failed") return now;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("verify did not end");
    return t;
  }
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "rejects come a page at a time, in SQL, with the true total") {
  loom::v1::ListRejectsRequest q;
  q.set_dataset("d");
  auto first = ok<loom::v1::ListRejectsReply>(q);  // no limit: a screenful
  CHECK(first.rejects_size() == 50);
  CHECK(first.total() == 120);
  CHECK(first.stored() == 120);
  CHECK(first.rejects(0).file() == "in/f0");
  q.set_limit(10);
  q.set_offset(115);
  auto last = ok<loom::v1::ListRejectsReply>(q);
  REQUIRE(last.rejects_size() == 5);
  CHECK(last.offset() == 115);
  CHECK(last.rejects(0).file() == "in/f115");
  CHECK(last.total() == 120);
  q.set_limit(1'000'000);  // capped, not refused
  q.set_offset(0);
  CHECK(ok<loom::v1::ListRejectsReply>(q).rejects_size() == 120);
}

TEST_CASE_FIXTURE(fixture, "a deleted shard makes the dataset damaged in status and list, naming the dataset's own shard") {
  CHECK(status().dataset().state() == "ready");
  CHECK(status().dataset().rejects() == 120);
  fs::remove(dir + "/shard-000002.bin");
  auto st = status();
  CHECK(st.dataset().state() == "damaged");
  CHECK(st.dataset().damage() == "shard-000002.bin is missing");
  REQUIRE(st.shards_size() >= 3);
  CHECK(st.shards(0).problem().empty());
  CHECK(st.shards(1).problem() == "is missing");
  auto list = ok<loom::v1::ListDatasetsReply>(loom::v1::ListDatasetsRequest{});
  REQUIRE(list.datasets_size() == 1);
  CHECK(list.datasets(0).state() == "damaged");
  // The sync server will not serve it either, and says which shard.
  auto serve = servable(root, "d");
  CHECK(serve.code() == errc::corruption);
  CHECK(serve.err().message.find("dataset d is damaged") != std::string::npos);
  CHECK(serve.err().message.find("shard-000002.bin is missing") != std::string::npos);
  CHECK(servable(root, "no-such-dataset").ok());  // the server's own not_found answers that
}

TEST_CASE_FIXTURE(fixture, "verify names a corrupt shard the cheap check cannot see, and status says damaged until a clean verify") {
  const std::string shard = dir + "/shard-000001.bin";
  const std::string good = *files::read_file(shard);
  std::string bad = good;
  bad[bad.size() / 2] ^= 0x20;
  REQUIRE(files::write_atomic(shard, bad).ok());
  CHECK(status().dataset().state() == "ready");  // same size: only a hash sees it
  auto t = verify();
  CHECK(t.state() == "failed");
  CHECK(t.message().find("dataset d is damaged: shard-000001.bin has SHA-256 ") != std::string::npos);
  CHECK(t.report_json().find("shard-000001.bin") != std::string::npos);
  auto st = status();
  CHECK(st.dataset().state() == "damaged");
  CHECK(st.dataset().damage().starts_with("shard-000001.bin has SHA-256 "));
  CHECK(st.dataset().verified_unix_ns() > 0);

  REQUIRE(files::write_atomic(shard, good).ok());
  auto again = verify();
  CHECK(again.state() == "succeeded");
  CHECK(again.shards() >= 3);
  CHECK(again.bytes_read() > 0);
  CHECK(status().dataset().state() == "ready");
  loom::v1::VerifyDatasetRequest none;
  none.set_name("nope");
  CHECK(call(none).code == errc::not_found);
}

TEST_CASE_FIXTURE(fixture, "an import naming an unknown node, or a path outside the roots, is refused with the reason in its audit payload") {
  loom::v1::ImportDatasetRequest q;
  q.set_path(data.path() + "/imports/corpus");
  q.set_dataset("n");
  q.add_nodes("trainer@h1");
  q.add_nodes("nosuchnode");
  auto h = call(q);
  CHECK(h.code == errc::invalid_argument);
  CHECK(h.message.find("'nosuchnode'") != std::string::npos);
  CHECK(h.audit_payload.find("nosuchnode") != std::string::npos);

  q.clear_nodes();
  q.set_path("/etc");
  h = call(q);
  CHECK(h.code == errc::permission_denied);
  CHECK(h.message.find("/etc") != std::string::npos);
  CHECK(h.message.find(data.path() + "/imports") != std::string::npos);
  CHECK(h.audit_payload.find("\"refused\"") != std::string::npos);
  CHECK(h.audit_payload.find(data.path() + "/imports") != std::string::npos);

  roster.clear();  // the scheduler cannot be asked: refused, not guessed
  q.set_path(data.path() + "/imports/corpus");
  q.add_nodes("trainer@h1");
  CHECK(call(q).code == errc::unavailable);
  CHECK_FALSE(tasks->last_for("default", "n"));
}

TEST_CASE_FIXTURE(fixture, "the ingest logic refuses an unknown type naming the service and a bad body naming its type") {
  runtime::call_context ctx;
  auto unknown = logic->handle("loom.v1.SubmitJobRequest", "", ctx);
  CHECK(unknown.code == errc::unimplemented);
  CHECK(unknown.message == "ingest does not handle loom.v1.SubmitJobRequest");
  for (const char* type : {"loom.v1.ListDatasetsRequest", "loom.v1.ImportDatasetRequest", "loom.v1.GetTaskRequest",
                           "loom.v1.CancelTaskRequest", "loom.v1.DatasetStatusRequest", "loom.v1.ListRejectsRequest",
                           "loom.v1.VerifyDatasetRequest", "loom.v1.SyncInfoRequest", "loom.v1.PullDatasetRequest"}) {
    auto bad = logic->handle(type, "\xff\xff\xff", ctx);
    CHECK(bad.code == errc::invalid_argument);
    CHECK(bad.message == std::string("body is not a valid ") + type);
  }
  // Without a sync server the sync requests are unavailable, not unknown.
  CHECK(call(loom::v1::SyncInfoRequest{}).code == errc::unavailable);
  CHECK(call(loom::v1::PullDatasetRequest{}).code == errc::unavailable);
}

TEST_CASE("a request acts for the token's tenant, only an admin or this deployment's scheduler or trainer names another") {
  auto ctx = [](std::string tenant, std::string role, std::string peer) {
    runtime::call_context c;
    c.tenant = std::move(tenant);
    c.role = std::move(role);
    c.peer = std::move(peer);
    return c;
  };
  CHECK(*acting_tenant(ctx("acme", "operator", "client"), "") == "acme");
  CHECK(*acting_tenant(ctx("acme", "viewer", "client"), "acme") == "acme");
  CHECK(*acting_tenant(ctx("acme", "admin", "client"), "globex") == "globex");
  CHECK(*acting_tenant(ctx("default", "operator", "scheduler"), "acme") == "acme");  // the submit-time probe
  CHECK(*acting_tenant(ctx("default", "operator", "trainer"), "acme") == "acme");
  auto client = acting_tenant(ctx("acme", "operator", "client"), "globex");
  CHECK(client.code() == errc::permission_denied);
  CHECK(client.err().message.find("tenant globex: a operator of tenant acme (key client)") != std::string::npos);
  // Another service, a site's scheduler or trainer, an unknown key: never.
  for (const char* peer : {"ingest", "aggregator", "site:north:scheduler", "site:north:trainer", "unenrolled", ""})
    CHECK_MESSAGE(acting_tenant(ctx("default", "operator", peer), "acme").code() == errc::permission_denied, peer);
  CHECK(acting_tenant(ctx("acme", "admin", "client"), "bad tenant").code() == errc::invalid_argument);
}

TEST_CASE_FIXTURE(fixture, "another tenant's dataset and tasks answer not found, an admin sees every tenant's") {
  // "d" is tenant default's (the fixture's). Tenant acme sees none of it.
  loom::v1::DatasetStatusRequest st;
  st.set_name("d");
  auto hidden = call_as(st, "acme");
  CHECK(hidden.code == errc::not_found);
  CHECK(hidden.message == "no dataset d (`loom data list` lists them)");
  // Existence not disclosed: the answer is the one a name nobody has gets.
  loom::v1::DatasetStatusRequest absent;
  absent.set_name("never-made");
  CHECK(call_as(absent, "acme").message == "no dataset never-made (`loom data list` lists them)");
  loom::v1::ListRejectsRequest rj;
  rj.set_dataset("d");
  CHECK(call_as(rj, "acme").code == errc::not_found);
  loom::v1::VerifyDatasetRequest vf;
  vf.set_name("d");
  CHECK(call_as(vf, "acme").code == errc::not_found);
  CHECK(ok_as<loom::v1::ListDatasetsReply>(loom::v1::ListDatasetsRequest{}, "acme").datasets_size() == 0);
  // Naming the tenant does not help a non-admin over the client key.
  st.set_for_tenant("default");
  CHECK(call_as(st, "acme").code == errc::permission_denied);

  // Default's own verify task: acme can neither follow nor cancel it.
  vf.clear_for_tenant();
  auto task = ok_as<loom::v1::VerifyDatasetReply>(vf, "default").task();
  CHECK(task.tenant() == "default");
  loom::v1::GetTaskRequest get;
  get.set_id(task.id());
  CHECK(call_as(get, "acme").code == errc::not_found);
  loom::v1::CancelTaskRequest cancel;
  cancel.set_id(task.id());
  CHECK(call_as(cancel, "acme").code == errc::not_found);
  CHECK(wait_task(task.id(), "default").state() == "succeeded");  // acme's cancel did nothing
  CHECK(call_as(get, "acme", "admin").code == errc::ok);

  // An admin lists every tenant's, names one, and reads it by name.
  auto all = ok_as<loom::v1::ListDatasetsReply>(loom::v1::ListDatasetsRequest{}, "acme", "admin");
  REQUIRE(all.datasets_size() == 1);
  CHECK(all.datasets(0).tenant() == "default");
  CHECK(all.datasets(0).dir() == root + "/d");
  loom::v1::ListDatasetsRequest only;
  only.set_for_tenant("acme");
  CHECK(ok_as<loom::v1::ListDatasetsReply>(only, "default", "admin").datasets_size() == 0);
  CHECK(ok_as<loom::v1::DatasetStatusReply>(st, "acme", "admin").dataset().tenant() == "default");
  // The scheduler asks for a job's tenant with its own key and a service token (tenant default).
  st.set_for_tenant("acme");
  CHECK(call_as(st, "default", "operator", "scheduler").code == errc::not_found);
  st.set_for_tenant("default");
  CHECK(ok_as<loom::v1::DatasetStatusReply>(st, "default", "operator", "scheduler").dataset().state() == "ready");
}

TEST_CASE_FIXTURE(fixture, "tenant acme imports its own d beside default's: two datasets, and one without tokens is empty, not ready") {
  loom::v1::ImportDatasetRequest q;
  q.set_path(data.path() + "/imports/corpus");  // an empty directory: nothing to keep
  q.set_dataset("d");
  auto started = ok_as<loom::v1::ImportDatasetReply>(q, "acme");
  CHECK(started.task().tenant() == "acme");
  auto done = wait_task(started.task().id(), "acme");
  REQUIRE_MESSAGE(done.state() == "succeeded", done.message());
  CHECK(fs::exists(root + "/.tenant-acme/d/manifest.json"));

  loom::v1::DatasetStatusRequest st;
  st.set_name("d");
  auto acme = ok_as<loom::v1::DatasetStatusReply>(st, "acme");
  CHECK(acme.dataset().tenant() == "acme");
  CHECK(acme.dataset().dir() == root + "/.tenant-acme/d");
  CHECK(acme.dataset().tokens() == 0);
  CHECK(acme.dataset().state() == "empty");
  CHECK(acme.dataset().reason().find("it has no tokens") != std::string::npos);
  CHECK(acme.last_task().id() == started.task().id());
  auto mine = ok_as<loom::v1::DatasetStatusReply>(st, "default");
  CHECK(mine.dataset().state() == "ready");  // default's d untouched
  CHECK(mine.dataset().tokens() > 0);
  CHECK(mine.dataset().version() == 1);
  CHECK_FALSE(mine.has_last_task());  // acme's import is not default's task
  auto all = ok_as<loom::v1::ListDatasetsReply>(loom::v1::ListDatasetsRequest{}, "x", "admin");
  CHECK(all.datasets_size() == 2);
}

TEST_CASE_FIXTURE(fixture, "a pull's source tenant travels to the sync server and its target is the caller's tenant") {
  std::string pulled_into, pulled_from;
  ingest_parts p;
  p.tasks = tasks;
  p.db = db.get();
  p.datasets_root = root;
  p.sync_info = [] { return result<sync_endpoint>(sync_endpoint{"tcp://127.0.0.1:1", "k"}); };
  p.pull = [&](const std::string& tenant, const std::string& dataset, const std::string&, const std::string&,
               const std::string& source_tenant, const std::string&) -> result<task_info> {
    pulled_into = tenant + "/" + dataset;
    pulled_from = source_tenant;
    return task_info{};
  };
  std::string granted;
  p.sync_grant = [&](const std::string& key, const std::string& tenant, const std::string& dataset,
                     const std::string&) -> loom::status {
    granted = key + " " + tenant + "/" + dataset;
    return ok_status();
  };
  logic.emplace(std::move(p));
  loom::v1::PullDatasetRequest q;
  q.set_dataset("notes");
  q.set_source_tenant("acme");
  REQUIRE(call_as(q, "acme").code == errc::ok);
  CHECK(pulled_into == "acme/notes");
  CHECK(pulled_from == "acme");
  q.set_for_tenant("globex");
  CHECK(call_as(q, "acme").code == errc::permission_denied);
  REQUIRE(call_as(q, "acme", "admin").code == errc::ok);
  CHECK(pulled_into == "globex/notes");

  // SyncInfo grants only a dataset of the caller's tenant; another's is not found.
  loom::v1::SyncInfoRequest g;
  g.set_dataset("d");
  g.set_peer_public_key("PEERKEY");
  auto hidden = call_as(g, "acme");
  CHECK(hidden.code == errc::not_found);
  CHECK(granted.empty());
  auto rep = ok_as<loom::v1::SyncInfoReply>(g, "default");
  CHECK(rep.tenant() == "default");
  CHECK(granted == "PEERKEY default/d");
  g.clear_peer_public_key();
  CHECK(call_as(g, "default").code == errc::invalid_argument);
  CHECK(ok_as<loom::v1::SyncInfoReply>(loom::v1::SyncInfoRequest{}, "acme").tenant().empty());  // no grant asked
}

TEST_CASE_FIXTURE(fixture, "placing a dataset anew moves manifest.json and the catalogue together, and bad places are refused by name") {
  roster = {"trainer@h1", "trainer@h2"};
  loom::v1::PlaceDatasetRequest q;
  q.set_dataset("d");
  q.add_nodes("trainer@h1");
  q.add_nodes("trainer@h2");
  auto rep = ok<loom::v1::PlaceDatasetReply>(q);
  const auto before = status();
  REQUIRE(rep.shards() == static_cast<std::uint64_t>(before.shards_size()));
  CHECK(rep.shards_moved() == rep.shards());  // they were on no node before
  REQUIRE(rep.nodes_size() == 2);
  CHECK(rep.nodes(0).shards() + rep.nodes(1).shards() == rep.shards());
  CHECK(rep.nodes(0).shards() >= 1);
  CHECK(rep.nodes(1).shards() >= 1);
  auto m = shards::read_manifest(dir);
  REQUIRE(m.ok());
  for (int i = 0; i < before.shards_size(); ++i) {
    CHECK(before.shards(i).node() == m->shards[static_cast<std::size_t>(i)].node);  // catalogue == manifest.json
    CHECK(before.shards(i).node().starts_with("trainer@h"));
  }
  // Once more on the same nodes: nothing moves. h2 leaves: only its shards move.
  auto again = call(q);
  REQUIRE(again.code == errc::ok);
  CHECK(runtime::parse_as<loom::v1::PlaceDatasetReply>(again.body)->shards_moved() == 0);
  CHECK(again.audit_payload.find("\"shards_moved\":0") != std::string::npos);  // the audit record says what moved
  loom::v1::PlaceDatasetRequest one;
  one.set_dataset("d");
  one.add_nodes("trainer@h1");
  CHECK(ok<loom::v1::PlaceDatasetReply>(one).shards_moved() == rep.nodes(1).shards());
  const auto after = status();
  for (const auto& s : after.shards()) CHECK(s.node() == "trainer@h1");

  loom::v1::PlaceDatasetRequest unknown = q;
  unknown.add_nodes("trainer@nowhere");
  auto h = call(unknown);
  CHECK(h.code == errc::invalid_argument);
  CHECK(h.message.find("unknown node 'trainer@nowhere'") != std::string::npos);
  loom::v1::PlaceDatasetRequest none;
  none.set_dataset("d");
  h = call(none);
  CHECK(h.code == errc::invalid_argument);
  CHECK(h.message.find("name the nodes") != std::string::npos);
  // Another tenant's operator sees no dataset d; nothing changed.
  h = call_as(q, "acme");
  CHECK(h.code == errc::not_found);
  const auto still = status();
  for (const auto& s : still.shards()) CHECK(s.node() == "trainer@h1");
}
