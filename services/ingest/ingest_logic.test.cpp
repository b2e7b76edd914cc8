// The ingest logic over a real catalogue (SQLite in a temp dir) and a small
// dataset of real shards: rejects by the page, damaged datasets in status and
// list, `verify`, and the refusals of an import (nodes, roots) with their audit payload.
#include "services/ingest/ingest_logic.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/runtime/logic_pb.hpp"
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
    REQUIRE(tasks->record_dataset_dir("d", "00000000000000a1").ok());
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
  CHECK_FALSE(tasks->last_for("n"));
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
