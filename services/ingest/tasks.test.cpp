// The task runner across restarts (ids, staging), its import roots, and the
// node check of an import. No store: the catalogue has tests of its own.
#include "services/ingest/tasks.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "services/ingest/roster.hpp"
#include "services/ingest/task_ids.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <thread>

using namespace loom;
using namespace loom::ingest;
namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(files::write_atomic(path, text).ok());
}

// Waits (up to 30 s) for task `id` to end; its last info.
task_info wait_done(task_runner& r, const std::string& id) {
  for (int i = 0; i < 3000; ++i) {
    auto t = r.get(id);
    REQUIRE(t);
    if (t->state == "succeeded" || t->state == "failed" || t->state == "cancelled") return *t;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL("task " << id << " did not end");
  return {};
}

task_runner_options options(const std::string& data) {
  task_runner_options o;
  o.datasets_root = data + "/datasets";
  o.state_dir = data + "/ingest";
  o.import_roots = {data + "/imports"};
  return o;
}

}  // namespace

TEST_CASE("task ids go on after a restart instead of starting again at 000001") {
  files::temp_dir t("loom-task-ids");
  const std::string file = t.path() + "/ingest/task-ids.json";
  {
    task_ids ids(file);
    CHECK(*ids.next("imp") == "imp-000001");
    CHECK(*ids.next("imp") == "imp-000002");
    CHECK(*ids.next("pull") == "pull-000001");
  }
  task_ids again(file);
  CHECK(again.warning().empty());
  CHECK(*again.next("imp") == "imp-000003");
  CHECK(*again.next("pull") == "pull-000002");
  CHECK(*again.next("ver") == "ver-000001");
}

TEST_CASE("a corrupt task id file starts the numbers above any count reached, with a warning") {
  files::temp_dir t("loom-task-ids");
  const std::string file = t.path() + "/task-ids.json";
  write(file, "{not json");
  task_ids ids(file);
  CHECK(ids.warning().find(file) != std::string::npos);
  auto id = ids.next("imp");
  REQUIRE(id.ok());
  CHECK(std::stoull(id->substr(4)) > 1'600'000'000ULL);  // unix seconds
  task_ids after(file);  // the file is whole again
  CHECK(after.warning().empty());
  CHECK(std::stoull(after.next("imp")->substr(4)) == std::stoull(id->substr(4)) + 1);
}

TEST_CASE("a restarted runner removes what a killed import left in staging and does not reuse a task id") {
  files::temp_dir t("loom-runner");
  std::string first;
  {
    task_runner r(options(t.path()));
    auto task = r.start("pull", "default", "d", "src", "tester", [](task_context&) { return ok_status(); });
    REQUIRE(task.ok());
    first = task->id;
    CHECK(wait_done(r, first).state == "succeeded");
  }
  // What kill -9 of an import leaves: its staging version and its work dir.
  write(t.path() + "/datasets/.staging/d.0123456789abcdef/shard-000001.bin", "partial");
  write(t.path() + "/datasets/.staging/d.0123456789abcdef.work/pass1.spill", "scratch");
  task_runner r(options(t.path()));
  CHECK_FALSE(fs::exists(t.path() + "/datasets/.staging/d.0123456789abcdef"));
  CHECK_FALSE(fs::exists(t.path() + "/datasets/.staging/d.0123456789abcdef.work"));
  auto task = r.start("pull", "default", "d", "src", "tester", [](task_context&) { return ok_status(); });
  REQUIRE(task.ok());
  CHECK(first == "pull-000001");
  CHECK(task->id == "pull-000002");
}

TEST_CASE("an import source outside the import roots is refused naming it and the roots, and no task is made") {
  files::temp_dir t("loom-runner");
  const std::string imports = t.path() + "/imports", outside = t.path() + "/elsewhere";
  write(imports + "/ok/a.txt", "text");
  write(outside + "/secret.txt", "secret");
  fs::create_symlink(outside, imports + "/link-out");
  task_runner r(options(t.path()));
  auto start = [&](const std::string& source) {
    import_options o;
    o.source = source;
    o.dataset = "d";
    return r.start_import(o, "default", "tester");
  };
  for (const std::string& source : {outside + "/secret.txt", imports + "/link-out", std::string("/etc")}) {
    auto refused = start(source);
    CHECK_MESSAGE(refused.code() == errc::permission_denied, source);
    if (refused.ok()) continue;
    CHECK(refused.err().message.find(source) != std::string::npos);
    CHECK(refused.err().message.find("(" + imports + ")") != std::string::npos);
    CHECK(refused.err().message.find("--import-root") != std::string::npos);
  }
  CHECK(start(outside + "/missing").code() == errc::permission_denied);  // no probing outside
  auto missing = start(imports + "/missing");
  CHECK(missing.code() == errc::not_found);
  CHECK(missing.err().message.find(imports + "/missing") != std::string::npos);
  CHECK_FALSE(r.last_for("default", "d"));  // no task was made
}

TEST_CASE("import nodes must be trainer nodes of the deployment and an unknown one is named") {
  const std::vector<std::string> known{"trainer@h1", "trainer-2@h1"};
  CHECK(check_nodes({"trainer@h1", "trainer-2@h1"}, known).ok());
  auto st = check_nodes({"trainer@h1", "nosuchnode"}, known);
  REQUIRE(st.code() == errc::invalid_argument);
  CHECK(st.err().message.find("'nosuchnode'") != std::string::npos);
  CHECK(st.err().message.find("trainer@h1, trainer-2@h1") != std::string::npos);
  CHECK(check_nodes({"x"}, {}).err().message.find("(none registered)") != std::string::npos);
}
