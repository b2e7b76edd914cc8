// Two ingest sync services in one process (loopback, CURVE): who may read
// which tenant's dataset, grants, pulls into the caller's tenant, and a pull
// whose manifest.json lies refused with the previous copy intact.
#include "services/ingest/sync_service.hpp"

#include "libs/cdc/sync_client.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/shards/testing.hpp"
#include "libs/shards/writer.hpp"
#include "services/ingest/tasks.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <filesystem>
#include <thread>

using namespace loom;
using namespace loom::ingest;
namespace fs = std::filesystem;

namespace {

void put_key(const std::string& dir, const std::string& stem, const std::string& key) {
  fs::create_directories(dir);
  REQUIRE(files::write_atomic(dir + "/" + stem + ".pub", key + "\n", 0644).ok());
}

// A shard dataset of a few hundred documents in `dir`.
void make_dataset(const std::string& dir, std::uint32_t seed) {
  shards::writer_options o;
  o.dir = dir;
  o.target_bytes = 8192;
  auto w = shards::shard_writer::create(o);
  REQUIRE(w.ok());
  for (const auto& d : shards::testing::make_docs(300, 60, 50000, seed)) REQUIRE(w->append(d).ok());
  REQUIRE(w->finish().ok());
}

std::string file(const std::string& path) {
  auto t = files::read_file(path);
  REQUIRE(t.ok());
  return *t;
}

// One ingest's sync side: its data dir, key, task runner and sync service.
struct site {
  files::temp_dir data{"loom-sync-svc"};
  wire::curve_keypair key = wire::generate_keypair();
  std::shared_ptr<task_runner> tasks;
  std::unique_ptr<sync_service> sync;

  void start() {
    task_runner_options o;
    o.datasets_root = data.path() + "/datasets";
    tasks = std::make_shared<task_runner>(o);
    sync_service_options so;
    so.data_dir = data.path();
    so.keys = key;
    so.tasks = tasks;
    auto s = sync_service::start(std::move(so));
    REQUIRE_MESSAGE(s.ok(), s.err().to_string());
    sync = std::move(*s);
  }
  std::string root() const { return data.path() + "/datasets"; }

  task_info pull(const site& from, const std::string& tenant, const std::string& dataset,
                 const std::string& source_tenant) {
    auto t = sync->pull(tenant, dataset, from.sync->endpoint(), from.key.public_z85, source_tenant, "tester");
    REQUIRE_MESSAGE(t.ok(), t.err().to_string());
    for (int i = 0; i < 3000; ++i) {
      auto now = tasks->get(t->id);
      REQUIRE(now);
      if (now->state == "succeeded" || now->state == "failed") return *now;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("pull did not end");
    return {};
  }
};

}  // namespace

TEST_CASE("a sync peer reads only the tenant's dataset it was granted, the trainer key reads any, a peer file named "
          "like a service is no service") {
  site a, b;
  const auto trainer = wire::generate_keypair(), client = wire::generate_keypair();
  put_key(a.data.path() + "/keys/curve", "trainer", trainer.public_z85);
  put_key(a.data.path() + "/keys/curve", "client", client.public_z85);
  put_key(a.data.path() + "/keys/peers", "trainer", b.key.public_z85);  // b's ingest, in a file called trainer.pub
  make_dataset(a.root() + "/.tenant-acme/notes", 1);
  make_dataset(a.root() + "/notes", 2);  // default's notes: other bytes
  a.start();
  b.start();
  REQUIRE(a.sync->info().ok());

  CHECK(a.sync->may_read("trainer", "acme", "notes"));
  CHECK(a.sync->may_read("trainer", "default", "anything"));
  CHECK_FALSE(a.sync->may_read("peer:trainer", "acme", "notes"));
  CHECK_FALSE(a.sync->may_read("client", "acme", "notes"));
  CHECK(a.sync->grant(client.public_z85, "acme", "notes", "acme-ops").code() == errc::permission_denied);
  CHECK(a.sync->grant(wire::generate_keypair().public_z85, "acme", "notes", "acme-ops").code() ==
        errc::permission_denied);  // not admitted at all

  // Before the grant, b's pull of acme's notes is refused by a's sync server.
  auto refused = b.pull(a, "acme", "notes", "acme");
  CHECK(refused.state == "failed");
  CHECK(refused.message.find("may not read dataset \"notes\" of tenant acme") != std::string::npos);
  CHECK_FALSE(fs::exists(b.root() + "/.tenant-acme/notes"));

  REQUIRE(a.sync->grant(b.key.public_z85, "acme", "notes", "acme-ops").ok());
  CHECK(a.sync->may_read("peer:trainer", "acme", "notes"));
  CHECK_FALSE(a.sync->may_read("peer:trainer", "default", "notes"));  // the grant names the tenant
  auto pulled = b.pull(a, "acme", "notes", "acme");
  REQUIRE_MESSAGE(pulled.state == "succeeded", pulled.message);
  CHECK(pulled.tenant == "acme");
  CHECK(file(b.root() + "/.tenant-acme/notes/manifest.json") == file(a.root() + "/.tenant-acme/notes/manifest.json"));
  CHECK_FALSE(fs::exists(b.root() + "/notes"));
  // Default's notes at a were not granted.
  auto other = b.pull(a, "default", "notes", "");
  CHECK(other.state == "failed");
  CHECK_FALSE(fs::exists(b.root() + "/notes"));
}

TEST_CASE("a pull whose manifest.json lies is refused naming the shard and the field, and the previous copy stands") {
  site a, b;
  make_dataset(a.root() + "/corpus", 3);
  a.start();
  b.start();
  put_key(a.data.path() + "/keys/peers", "peer-b", b.key.public_z85);
  REQUIRE(a.sync->grant(b.key.public_z85, "default", "corpus", "ops").ok());
  REQUIRE(b.pull(a, "default", "corpus", "").state == "succeeded");
  const std::string good = file(b.root() + "/corpus/manifest.json");

  auto m = nlohmann::json::parse(file(a.root() + "/corpus/manifest.json"));
  for (auto& s : m["shards"]) {
    s["sha256"] = std::string(64, '0');
    s["tokens"] = s["tokens"].get<std::uint64_t>() * 10;
  }
  REQUIRE(files::write_atomic(a.root() + "/corpus/manifest.json", m.dump(2) + "\n").ok());
  auto t = b.pull(a, "default", "corpus", "");
  CHECK(t.state == "failed");
  CHECK(t.message.find("shard-000001.bin: sha256: manifest.json says 0000") != std::string::npos);
  CHECK(t.message.find("shard-000001.bin: tokens: manifest.json says") != std::string::npos);
  CHECK(t.message.find("the previous copy stands") != std::string::npos);
  CHECK(file(b.root() + "/corpus/manifest.json") == good);
}
