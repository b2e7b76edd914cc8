// The ingest catalogue on both engines (CTest names end in [sqlite] / [postgres]).
#include "services/ingest/importer/catalog.hpp"

#include "libs/files/temp_dir.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "services/ingest/importer/rejects.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::ingest;

namespace {

constexpr store::backend engine = store::testing::suite_backend;

// A finished import as import_dataset returns it, with a rejects.jsonl of `n` lines.
import_summary fake_import(const std::string& dir, const std::string& id, std::size_t shards, std::size_t n) {
  import_summary s;
  s.dataset = "wiki";
  s.import_id = id;
  s.dir = dir;
  s.report_path = dir + "/report.json";
  s.kept = 10 * shards;
  for (std::size_t i = 0; i < shards; ++i) {
    shards::shard_info sh;
    sh.name = shards::shard_file_name(i + 1);
    sh.sha256 = std::string(64, static_cast<char>('a' + i));
    sh.bytes = 1000 + i;
    sh.tokens = 400;
    sh.docs = 10;
    sh.node = i % 2 ? "edge-b" : "edge-a";
    s.manifest.shards.push_back(sh);
    s.tokens += sh.tokens;
  }
  auto w = rejects_writer::create(dir + "/rejects.jsonl");
  REQUIRE(w.ok());
  for (std::size_t i = 0; i < n; ++i)
    REQUIRE(w->add("reader", "corrupt_compression", "in/f" + std::to_string(i) + ".gz", i, std::string("nul\0byte", 8)).ok());
  REQUIRE(w->close().ok());
  s.rejects = n;
  return s;
}

}  // namespace

TEST_CASE("a finished import is recorded in one transaction and re-imports bump the version") {
  auto scratch = store::testing::scratch::make(engine, "ingest_catalog");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, ingest_migrations()).ok());
  REQUIRE(store::migrate(**db, ingest_migrations()).ok());  // idempotent
  files::temp_dir t("loom-catalog");
  catalog cat(**db);

  REQUIRE(cat.record_import("default", fake_import(t.path(), "00000000000000c1", 3, 5), 1000).ok());
  auto d = cat.dataset("default", "wiki");
  REQUIRE(d.ok());
  REQUIRE(d->has_value());
  CHECK((*d)->version == 1);
  CHECK((*d)->shards == 3);
  CHECK((*d)->tokens == 1200);
  CHECK((*d)->bytes == 3003);
  CHECK((*d)->state == "ready");
  CHECK((*d)->created_ns == 1000);
  auto sh = cat.shards("default", "wiki");
  REQUIRE(sh.ok());
  REQUIRE(sh->size() == 3);
  CHECK((*sh)[1].name == "shard-000002.bin");
  CHECK((*sh)[1].node == "edge-b");
  auto rj = cat.rejects("default", "wiki", 2);
  REQUIRE(rj.ok());
  REQUIRE(rj->size() == 2);
  CHECK((*rj)[0].seq == 1);
  CHECK((*rj)[1].file == "in/f1.gz");
  CHECK((*rj)[1].line == 1);
  CHECK((*rj)[1].rule == "corrupt_compression");
  CHECK((*rj)[1].detail == "nulbyte");  // PostgreSQL TEXT holds no NUL

  // A re-import replaces shards and rejects; the row keeps its creation time.
  REQUIRE(cat.record_import("default", fake_import(t.path(), "00000000000000c2", 2, 1), 2000).ok());
  d = cat.dataset("default", "wiki");
  CHECK((*d)->version == 2);
  CHECK((*d)->import_id == "00000000000000c2");
  CHECK((*d)->created_ns == 1000);
  CHECK((*d)->updated_ns == 2000);
  CHECK(cat.shards("default", "wiki")->size() == 2);
  auto all = cat.rejects("default", "wiki", 0);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 1);
  CHECK((*all)[0].import_id == "00000000000000c2");

  auto list = cat.datasets("");
  REQUIRE(list.ok());
  CHECK(list->size() == 1);
  CHECK(cat.dataset("default", "nope")->has_value() == false);
}

TEST_CASE("a failed record leaves the catalogue as it was") {
  auto scratch = store::testing::scratch::make(engine, "ingest_catalog_fail");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, ingest_migrations()).ok());
  files::temp_dir t("loom-catalog");
  catalog cat(**db);
  REQUIRE(cat.record_import("default", fake_import(t.path(), "00000000000000d1", 2, 2), 1000).ok());
  auto broken = fake_import(t.path(), "00000000000000d2", 4, 2);
  broken.dir = t.path() + "/missing";  // its rejects.jsonl cannot be read
  CHECK(!cat.record_import("default", broken, 2000).ok());
  auto d = cat.dataset("default", "wiki");
  CHECK((*d)->version == 1);
  CHECK(cat.shards("default", "wiki")->size() == 2);
  CHECK(cat.rejects("default", "wiki", 0)->size() == 2);
}

TEST_CASE("the rejects count is the true total past the catalogue's cap, and pages come from SQL with an offset") {
  auto scratch = store::testing::scratch::make(engine, "ingest_catalog_rejects");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, ingest_migrations()).ok());
  files::temp_dir t("loom-catalog");
  catalog cat(**db);
  REQUIRE(cat.record_import("default", fake_import(t.path(), "00000000000000e1", 1, 25), 1000, /*max_rejects=*/10).ok());
  auto d = cat.dataset("default", "wiki");
  REQUIRE(d.ok());
  CHECK((*d)->rejects == 25);  // not the 10 rows kept
  CHECK(*cat.stored_rejects("default", "wiki") == 10);
  auto page = cat.rejects("default", "wiki", 3, 4);
  REQUIRE(page.ok());
  REQUIRE(page->size() == 3);
  CHECK((*page)[0].seq == 5);
  CHECK((*page)[2].file == "in/f6.gz");
  CHECK(cat.rejects("default", "wiki", 50, 8)->size() == 2);   // the last page is short
  CHECK(cat.rejects("default", "wiki", 50, 10)->empty());      // past the end
  CHECK(*cat.stored_rejects("default", "nope") == 0);

  // A summary that says fewer than the file holds (a pull) still counts every stored row.
  auto pulled = fake_import(t.path(), "00000000000000e2", 1, 7);
  pulled.rejects = 0;
  REQUIRE(cat.record_import("default", pulled, 2000).ok());
  CHECK((*cat.dataset("default", "wiki"))->rejects == 7);
}

TEST_CASE("a verify's finding sticks to its version and a re-import clears it") {
  auto scratch = store::testing::scratch::make(engine, "ingest_catalog_verify");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, ingest_migrations()).ok());
  files::temp_dir t("loom-catalog");
  catalog cat(**db);
  REQUIRE(cat.record_import("default", fake_import(t.path(), "00000000000000f1", 2, 0), 1000).ok());
  REQUIRE(cat.record_verify("default", "wiki", "00000000000000f1", "shard-000002.bin has SHA-256 00, the manifest says bb", 1500).ok());
  auto d = cat.dataset("default", "wiki");
  CHECK((*d)->damage == "shard-000002.bin has SHA-256 00, the manifest says bb");
  CHECK((*d)->verified_ns == 1500);
  CHECK(cat.record_verify("default", "wiki", "00000000000000ff", "", 1600).code() == errc::not_found);  // another version
  REQUIRE(cat.record_import("default", fake_import(t.path(), "00000000000000f2", 2, 0), 2000).ok());
  d = cat.dataset("default", "wiki");
  CHECK((*d)->damage.empty());
  CHECK((*d)->verified_ns == 0);
}

TEST_CASE("two tenants' datasets of one name are two datasets: rows, shards, rejects and verifies never cross") {
  auto scratch = store::testing::scratch::make(engine, "ingest_catalog_tenants");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, ingest_migrations()).ok());
  files::temp_dir ta("loom-catalog-a"), tb("loom-catalog-b");
  catalog cat(**db);
  REQUIRE(cat.record_import("acme", fake_import(ta.path(), "imp-000001", 3, 5), 1000).ok());
  REQUIRE(cat.record_import("globex", fake_import(tb.path(), "imp-000002", 1, 2), 1100).ok());

  auto a = cat.dataset("acme", "wiki");
  auto b = cat.dataset("globex", "wiki");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->has_value());
  REQUIRE(b->has_value());
  CHECK((*a)->tenant == "acme");
  CHECK((*a)->shards == 3);
  CHECK((*a)->version == 1);
  CHECK((*b)->tenant == "globex");
  CHECK((*b)->shards == 1);
  CHECK((*b)->version == 1);  // not a re-import of acme's
  CHECK_FALSE(cat.dataset("default", "wiki")->has_value());
  CHECK(cat.shards("acme", "wiki")->size() == 3);
  CHECK(cat.shards("globex", "wiki")->size() == 1);
  CHECK(*cat.stored_rejects("acme", "wiki") == 5);
  CHECK(cat.rejects("globex", "wiki", 0)->size() == 2);

  auto only_acme = cat.datasets("acme");
  REQUIRE(only_acme.ok());
  REQUIRE(only_acme->size() == 1);
  CHECK(only_acme->front().tenant == "acme");
  auto all = cat.datasets("");
  REQUIRE(all.ok());
  REQUIRE(all->size() == 2);
  CHECK(all->at(0).tenant == "acme");
  CHECK(all->at(1).tenant == "globex");

  REQUIRE(cat.record_verify("acme", "wiki", "imp-000001", "shard-000001.bin is missing", 1200).ok());
  CHECK((*cat.dataset("globex", "wiki"))->damage.empty());
  CHECK(cat.record_verify("globex", "wiki", "imp-000001", "", 1300).code() == errc::not_found);  // acme's version id
  // A re-import by globex replaces only globex's.
  REQUIRE(cat.record_import("globex", fake_import(tb.path(), "imp-000003", 2, 0), 1400).ok());
  CHECK((*cat.dataset("globex", "wiki"))->version == 2);
  CHECK(*cat.stored_rejects("globex", "wiki") == 0);
  CHECK(*cat.stored_rejects("acme", "wiki") == 5);
  CHECK((*cat.dataset("acme", "wiki"))->damage == "shard-000001.bin is missing");
}

TEST_CASE("a catalogue of before tenants migrates whole: every dataset, shard and reject belongs to tenant default") {
  auto scratch = store::testing::scratch::make(engine, "ingest_catalog_v2");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, ingest_migrations().first(2)).ok());
  // Rows as a v2 ingest wrote them.
  REQUIRE((**db).with_transaction([](store::transaction& tx) -> status {
    for (const char* sql :
         {"INSERT INTO datasets (name, version, import_id, documents, tokens, shards, bytes, state, created_unix_ns, "
          "updated_unix_ns, report_path, rejects, damage, verified_unix_ns) VALUES ('wiki', 4, 'imp-000009', 20, 800, "
          "2, 2001, 'ready', 5, 6, '/r.json', 3, 'shard-000002.bin is missing', 7)",
          "INSERT INTO dataset_shards (dataset, idx, name, sha256, bytes, tokens, docs, node) VALUES "
          "('wiki', 0, 'shard-000001.bin', 'aa', 1000, 400, 10, 'edge-a')",
          "INSERT INTO dataset_shards (dataset, idx, name, sha256, bytes, tokens, docs, node) VALUES "
          "('wiki', 1, 'shard-000002.bin', 'bb', 1001, 400, 10, 'edge-b')",
          "INSERT INTO import_rejects (dataset, import_id, seq, stage, file, line, rule, detail) VALUES "
          "('wiki', 'imp-000009', 1, 'reader', 'a.gz', 0, 'corrupt_compression', '')"}) {
      auto r = tx.exec(sql);
      if (!r) return r.err();
    }
    return ok_status();
  }).ok());
  REQUIRE(store::migrate(**db, ingest_migrations()).ok());
  catalog cat(**db);
  auto d = cat.dataset("default", "wiki");
  REQUIRE(d.ok());
  REQUIRE(d->has_value());
  CHECK((*d)->tenant == "default");
  CHECK((*d)->version == 4);
  CHECK((*d)->tokens == 800);
  CHECK((*d)->rejects == 3);
  CHECK((*d)->damage == "shard-000002.bin is missing");
  CHECK((*d)->verified_ns == 7);
  auto sh = cat.shards("default", "wiki");
  REQUIRE(sh.ok());
  REQUIRE(sh->size() == 2);
  CHECK(sh->at(1).node == "edge-b");
  CHECK(cat.rejects("default", "wiki", 0)->size() == 1);
  // The migrated tables take new rows of other tenants under the same name.
  files::temp_dir t("loom-catalog");
  REQUIRE(cat.record_import("acme", fake_import(t.path(), "imp-000010", 1, 1), 2000).ok());
  CHECK(cat.datasets("")->size() == 2);
  REQUIRE(cat.record_import("default", fake_import(t.path(), "imp-000011", 1, 1), 2100).ok());
  CHECK((*cat.dataset("default", "wiki"))->version == 5);
}
