// The audit log in the state store: exactly once, in order, per source, as a
// hash chain with sealed payloads; watermarks survive reopening (also across
// the v1 -> v2 migration, whose rows are kept); the tables refuse UPDATE and
// DELETE. The same suite on SQLite and PostgreSQL ([sqlite] / [postgres]).
#include "libs/auditchain/anchor_file.hpp"
#include "libs/auditchain/store_io.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "loom/v1/audit.pb.h"
#include "services/audit/audit_log.hpp"
#include "services/audit/schema.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace loom;

namespace {
constexpr store::backend engine = store::testing::suite_backend;

std::string ev(const std::string& source, std::uint64_t seq, const std::string& rid = "", const std::string& job = "") {
  v1::AuditEvent e;
  e.set_source(source);
  e.set_source_seq(seq);
  e.set_action("loom.v1.DrainNodeRequest");
  e.set_request_id(rid);
  e.set_job_id(job);
  e.set_decision(v1::DENY);
  e.set_payload(std::string("canary-payload\0b", 16));
  return e.SerializeAsString();
}

template <class R>
std::string why(const R& r) {
  return r.ok() ? std::string() : r.err().to_string();
}

struct fixture {
  files::temp_dir dir{"auditlog"};
  result<store::testing::scratch> scratch = store::testing::scratch::make(engine, "auditlog");
  std::unique_ptr<store::database> db;
  explicit fixture(bool migrate_all = true) {
    REQUIRE(scratch.ok());
    auto d = store::database::open(scratch->url());
    REQUIRE(d.ok());
    db = std::move(*d);
    if (migrate_all) REQUIRE(store::migrate(*db, audit_service::audit_migrations()).ok());
  }
  audit_service::audit_log_options options() const {
    audit_service::audit_log_options o;
    o.url = scratch->url();
    o.keys_dir = dir.path() + "/keys";
    o.anchor_path = dir.path() + "/anchors.log";
    return o;
  }
  std::unique_ptr<audit_service::audit_log> open() {
    auto l = audit_service::audit_log::open(options());
    REQUIRE_MESSAGE(l.ok(), why(l));
    return std::move(*l);
  }
  std::vector<v1::AuditEvent> query(audit_service::audit_log& log, const audit_service::event_filter& f,
                                    std::uint32_t limit = 1000) {
    auto found = db->with_read_transaction(
        [&](store::transaction& tx) { return audit_service::query_events(tx, log.keys(), f, limit); });
    REQUIRE_MESSAGE(found.ok(), why(found));
    std::vector<v1::AuditEvent> out;
    for (auto& b : *found) REQUIRE(out.emplace_back().ParseFromString(b));
    return out;
  }
  auditchain::verify_report verify() {
    auditchain::verify_options o;
    o.keys_dir = dir.path() + "/keys";
    o.anchor_file = dir.path() + "/anchors.log";
    auto r = auditchain::verify_store(*db, o);
    REQUIRE_MESSAGE(r.ok(), why(r));
    return *r;
  }
};
struct fresh : fixture {
  fresh() : fixture(true) {}
};
}  // namespace

TEST_CASE_FIXTURE(fresh, "events are stored once per source in order, duplicates and gaps are refused") {
  auto log = open();
  std::vector<std::string> batch = {ev("a", 1), ev("a", 1), ev("a", 3), ev("b", 1), "garbage", ev("a", 2)};
  auto out = log->append_batch(batch);
  REQUIRE(out.ok());
  CHECK(out->stored == 3);
  CHECK(out->duplicate == 1);
  CHECK(out->gap == 1);
  CHECK(out->invalid == 1);
  CHECK(log->watermark("a") == 2);
  CHECK(log->watermark("b") == 1);
  CHECK(log->total() == 3);
  auto rep = verify();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.rows == 3);
}

TEST_CASE_FIXTURE(fresh, "watermarks and the chain survive reopening, and queries filter, decrypt and keep payload bytes") {
  {
    auto log = open();
    std::vector<std::string> batch;
    for (std::uint64_t i = 1; i <= 100; ++i) batch.push_back(ev("a", i, "r" + std::to_string(i), i % 10 ? "" : "job-x"));
    REQUIRE(log->append_batch(batch).ok());
  }
  auto log = open();
  CHECK(log->watermark("a") == 100);
  CHECK(log->total() == 100);
  std::vector<std::string> more = {ev("a", 101), ev("a", 50)};
  auto out = log->append_batch(more);
  REQUIRE(out.ok());
  CHECK(out->stored == 1);
  CHECK(out->duplicate == 1);
  audit_service::event_filter by_rid;
  by_rid.request_id = "r42";
  auto found = query(*log, by_rid);
  REQUIRE(found.size() == 1);
  CHECK(found[0].source_seq() == 42);
  CHECK(found[0].seq() == 42);
  CHECK(found[0].payload() == std::string("canary-payload\0b", 16));
  CHECK(found[0].payload_state().empty());
  CHECK(found[0].decision() == v1::DENY);
  audit_service::event_filter tail;
  tail.source = "a";
  tail.after_source_seq = 95;
  CHECK(query(*log, tail).size() == 6);
  audit_service::event_filter job;
  job.job_id = "job-x";
  CHECK(query(*log, job).size() == 10);
  audit_service::event_filter newest;
  newest.newest = true;
  auto last3 = query(*log, newest, 3);
  REQUIRE(last3.size() == 3);
  CHECK(last3[0].seq() == 99);
  CHECK(last3[2].seq() == 101);
  audit_service::event_filter after;
  after.after_seq = 98;
  CHECK(query(*log, after).size() == 3);

  // At rest the payload is ciphertext: the plaintext is nowhere in the column.
  auto raw = db->with_read_transaction([](store::transaction& tx) -> result<std::string> {
    auto r = tx.query("SELECT payload FROM audit_events WHERE seq = 42");
    if (!r) return r.err();
    auto b = (*r)[0].get_blob(0);
    if (!b) return b.err();
    return b->bytes;
  });
  REQUIRE(raw.ok());
  CHECK(raw->find("canary-payload") == std::string::npos);
  CHECK(raw->size() == 16 + 21 + 16);  // header + ciphertext + tag

  // A forced checkpoint signs the tail; the chain and its anchors verify.
  auto t = log->tick(true);
  REQUIRE(t.ok());
  CHECK(*t);
  CHECK(log->anchored() == 101);
  auto rep = verify();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.anchored_seq == 101);
}

TEST_CASE_FIXTURE(fresh, "a checkpoint is signed every 1,000 rows in the batch that reaches them") {
  auto log = open();
  std::vector<std::string> batch;
  for (std::uint64_t i = 1; i <= 2500; ++i) batch.push_back(ev("s", i));
  REQUIRE(log->append_batch(batch).ok());
  CHECK(log->anchored() == 2000);
  auto rep = verify();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.anchors >= 2);
}

TEST_CASE_FIXTURE(fresh, "the audit tables refuse UPDATE and DELETE") {
  auto log = open();
  std::vector<std::string> one = {ev("a", 1)};
  REQUIRE(log->append_batch(one).ok());
  REQUIRE(log->tick(true).ok());
  for (const char* sql : {"UPDATE audit_events SET reason = 'x'", "DELETE FROM audit_events",
                          "UPDATE audit_checkpoints SET unix_ns = 0", "DELETE FROM audit_checkpoints"}) {
    auto st = db->with_transaction([&](store::transaction& tx) -> status {
      auto r = tx.exec(sql);
      if (!r) return r.err();
      return {};
    });
    CHECK_FALSE_MESSAGE(st.ok(), std::string(sql));
    // audit_events' DELETE is the retention trigger's (archive.test.cpp): this
    // row is unarchived (and, stamped 1970, past the retention).
    if (!st.ok())
      CHECK_MESSAGE((st.err().message.find("append-only") != std::string::npos ||
                     st.err().message.find("only once an archive") != std::string::npos),
                    st.err().message);
  }
  CHECK(log->total() == 1);
}

TEST_CASE("schema v1 rows survive the move to the chain: kept, append-only, counted in watermarks and queries") {
  fixture f(false);
  auto v1_only = audit_service::audit_migrations().subspan(0, 1);
  REQUIRE(store::migrate(*f.db, v1_only).ok());
  auto put = f.db->with_transaction([](store::transaction& tx) -> status {
    for (int i = 1; i <= 5; ++i) {
      std::vector<store::value> p;
      p.emplace_back(std::int64_t{i});
      p.emplace_back(std::string("old"));
      p.emplace_back(std::int64_t{i});
      p.emplace_back(std::string("rid-old-") + std::to_string(i));
      auto r = tx.exec("INSERT INTO audit_events (seq, source, source_seq, unix_ns, request_id) VALUES ($1, $2, $3, 0, $4)", p);
      if (!r) return r.err();
    }
    return {};
  });
  REQUIRE_MESSAGE(put.ok(), why(put));
  auto mig = store::migrate(*f.db, audit_service::audit_migrations());
  REQUIRE_MESSAGE(mig.ok(), why(mig));
  auto log = f.open();
  CHECK(log->watermark("old") == 5);
  CHECK(log->total() == 0);
  std::vector<std::string> batch = {ev("old", 5), ev("old", 6), ev("new", 1)};
  auto out = log->append_batch(batch);
  REQUIRE(out.ok());
  CHECK(out->duplicate == 1);
  CHECK(out->stored == 2);
  audit_service::event_filter all;
  auto found = f.query(*log, all);
  REQUIRE(found.size() == 7);
  CHECK(found[0].seq() == 0);
  CHECK(found[0].request_id() == "rid-old-1");
  CHECK(found[5].seq() == 1);
  CHECK(found[5].source_seq() == 6);
  auto rep = f.verify();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  auto upd = f.db->with_transaction([](store::transaction& tx) -> status {
    auto r = tx.exec("UPDATE audit_events_v1 SET reason = 'x'");
    if (!r) return r.err();
    return {};
  });
  CHECK_FALSE(upd.ok());
}

TEST_CASE("rows chained before tenants keep verifying after v3, new rows hash their tenant and tenants see only theirs") {
  fixture f(false);
  auto v1_v2 = audit_service::audit_migrations().subspan(0, 2);
  REQUIRE(store::migrate(*f.db, v1_v2).ok());
  // Three rows as the v2 service chained them: encoding version 1, no tenant column yet.
  auto put = f.db->with_transaction([](store::transaction& tx) -> status {
    auditchain::chain_tail tail;
    auditchain::row_hasher h;
    for (std::uint64_t i = 1; i <= 3; ++i) {
      auditchain::chain_row r;
      r.version = auditchain::row_version_v1;
      r.source = "old";
      r.source_seq = i;
      r.unix_ns = 1;
      r.action = "loom.v1.CancelJobRequest";
      r.job_id = "job-old";
      r.payload = "sealed-before-v3";
      auditchain::link(tail, r, h);
      std::vector<store::value> p;
      p.emplace_back(static_cast<std::int64_t>(r.seq));
      p.emplace_back(r.source);
      p.emplace_back(static_cast<std::int64_t>(r.source_seq));
      p.emplace_back(r.unix_ns);
      p.emplace_back(r.action);
      p.emplace_back(r.job_id);
      p.emplace_back(store::blob{r.payload});
      p.emplace_back(store::blob{std::string(auditchain::as_view(r.prev_hash))});
      p.emplace_back(store::blob{std::string(auditchain::as_view(r.row_hash))});
      auto done = tx.exec("INSERT INTO audit_events (seq, source, source_seq, unix_ns, action, job_id, payload, "
                          "prev_hash, row_hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                          p);
      if (!done) return done.err();
    }
    return {};
  });
  REQUIRE_MESSAGE(put.ok(), why(put));
  auto mig = store::migrate(*f.db, audit_service::audit_migrations());
  REQUIRE_MESSAGE(mig.ok(), why(mig));
  auto log = f.open();
  CHECK(log->watermark("old") == 3);
  v1::AuditEvent acme;
  acme.set_source("new");
  acme.set_source_seq(1);
  acme.set_action("loom.v1.SubmitJobRequest");
  acme.set_job_id("job-acme");
  acme.set_tenant("acme");
  auto globex = acme;
  globex.set_source_seq(2);
  globex.set_job_id("job-globex");
  globex.set_tenant("globex");
  REQUIRE(log->append_batch(std::vector<std::string>{acme.SerializeAsString(), globex.SerializeAsString()}).ok());
  auto rep = f.verify();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.rows == 5);
  auto rows = f.db->with_read_transaction([](store::transaction& tx) { return auditchain::read_rows(tx, 1, 10); });
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 5);
  CHECK((*rows)[0].version == auditchain::row_version_v1);
  CHECK((*rows)[0].tenant.empty());
  CHECK((*rows)[3].version == auditchain::current_row_version);
  CHECK((*rows)[3].tenant == "acme");
  audit_service::event_filter mine;
  mine.tenant = "acme";
  auto found = f.query(*log, mine);
  REQUIRE(found.size() == 1);
  CHECK(found[0].job_id() == "job-acme");
  CHECK(found[0].tenant() == "acme");
  mine.job_id = "job-old";  // rows of no tenant are admins' only
  CHECK(f.query(*log, mine).empty());
  audit_service::event_filter everyone;
  CHECK(f.query(*log, everyone).size() == 5);
}

TEST_CASE("the released audit migrations never change") {
  // The checksums recorded in every deployed database: editing a released
  // migration (or the chain DDL it carries from libs/auditchain) breaks them.
  auto all = audit_service::audit_migrations();
  REQUIRE(all.size() == 4);
  MESSAGE("v1 " << store::checksum(all[0]) << " v2 " << store::checksum(all[1]) << " v3 " << store::checksum(all[2])
                << " v4 " << store::checksum(all[3]));
  CHECK(store::checksum(all[0]) == "ee9e85a0c0b927cfeb2f8643e404cd4f4594b8904720f5ddf4c987eff298fc64");
  CHECK(store::checksum(all[1]) == "b1630378f6f514bc0d02d69aba5cbd7e7cf4454a2da4fc1c89d58be0a49089aa");
  CHECK(store::checksum(all[2]) == "4d3d53b7f41c66f52dbff2a9fa8423a5c0a68af1fe74406bb5155d02d7e4105b");
  CHECK(store::checksum(all[3]) == "a82cb4816657056a8a3774285deeeb613089436f749e379e8255ae36c16d0317");
}

TEST_CASE_FIXTURE(fresh, "the first open writes the new anchor key's genesis line and a reopen never writes it again") {
  {
    auto log = open();
    REQUIRE(log->append_batch(std::vector<std::string>{ev("a", 1), ev("a", 2)}).ok());
  }
  auto first = auditchain::read_anchor_file(dir.path() + "/anchors.log");
  REQUIRE(first.ok());
  REQUIRE(first->checkpoints.size() == 1);
  CHECK(first->checkpoints[0].seq == 0);
  CHECK(verify().ok());
  // Emptied while the service is down: reopening keeps the evidence (no new
  // genesis line), so verify fails instead of starting over.
  std::filesystem::resize_file(dir.path() + "/anchors.log", 0);
  { auto log = open(); }
  auto after = auditchain::read_anchor_file(dir.path() + "/anchors.log");
  REQUIRE(after.ok());
  CHECK(after->checkpoints.empty());
  auto rep = verify();
  CHECK(rep.kind == auditchain::fault::anchor_missing);
  CHECK(rep.reason.find("holds no checkpoint") != std::string::npos);
}
