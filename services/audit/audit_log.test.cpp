// The audit log in the state store: exactly once, in order, per source;
// watermarks survive reopening; the table refuses UPDATE and DELETE. The same
// suite on SQLite and PostgreSQL ([sqlite] / [postgres] in the CTest names).
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "loom/v1/audit.pb.h"
#include "services/audit/audit_log.hpp"
#include "services/audit/schema.hpp"

#include <doctest/doctest.h>

using namespace loom;

namespace {
constexpr store::backend engine = store::testing::suite_backend;

std::string ev(const std::string& source, std::uint64_t seq, const std::string& rid = "") {
  v1::AuditEvent e;
  e.set_source(source);
  e.set_source_seq(seq);
  e.set_action("loom.v1.DrainNodeRequest");
  e.set_request_id(rid);
  e.set_decision(v1::DENY);
  e.set_payload(std::string("a\0b", 3));
  return e.SerializeAsString();
}

struct fixture {
  result<store::testing::scratch> scratch = store::testing::scratch::make(engine, "auditlog");
  std::unique_ptr<store::database> db;
  fixture() {
    REQUIRE(scratch.ok());
    auto d = store::database::open(scratch->url());
    REQUIRE(d.ok());
    db = std::move(*d);
    REQUIRE(store::migrate(*db, audit_service::audit_migrations()).ok());
  }
};
}  // namespace

TEST_CASE_FIXTURE(fixture, "events are stored once per source in order, duplicates and gaps are refused") {
  auto log = audit_service::audit_log::open(scratch->url());
  REQUIRE(log.ok());
  std::vector<std::string> batch = {ev("a", 1), ev("a", 1), ev("a", 3), ev("b", 1), "garbage", ev("a", 2)};
  auto out = (*log)->append_batch(batch);
  REQUIRE(out.ok());
  CHECK(out->stored == 3);
  CHECK(out->duplicate == 1);
  CHECK(out->gap == 1);
  CHECK(out->invalid == 1);
  CHECK((*log)->watermark("a") == 2);
  CHECK((*log)->watermark("b") == 1);
  CHECK((*log)->total() == 3);
}

TEST_CASE_FIXTURE(fixture, "watermarks and the gapless seq survive reopening, and queries filter and keep payload bytes") {
  {
    auto log = audit_service::audit_log::open(scratch->url());
    REQUIRE(log.ok());
    std::vector<std::string> batch;
    for (std::uint64_t i = 1; i <= 100; ++i) batch.push_back(ev("a", i, "r" + std::to_string(i)));
    REQUIRE((*log)->append_batch(batch).ok());
  }
  auto log = audit_service::audit_log::open(scratch->url());
  REQUIRE(log.ok());
  CHECK((*log)->watermark("a") == 100);
  std::vector<std::string> more = {ev("a", 101), ev("a", 50)};
  auto out = (*log)->append_batch(more);
  REQUIRE(out.ok());
  CHECK(out->stored == 1);
  CHECK(out->duplicate == 1);
  auto found = db->with_read_transaction([](store::transaction& tx) {
    return audit_service::query_events(tx, "", 0, "r42", 10);
  });
  REQUIRE(found.ok());
  REQUIRE(found->size() == 1);
  v1::AuditEvent e;
  REQUIRE(e.ParseFromString((*found)[0]));
  CHECK(e.source_seq() == 42);
  CHECK(e.payload() == std::string("a\0b", 3));
  CHECK(e.decision() == v1::DENY);
  auto tail = db->with_read_transaction([](store::transaction& tx) {
    return audit_service::query_events(tx, "a", 95, "", 100);
  });
  REQUIRE(tail.ok());
  CHECK(tail->size() == 6);
  auto seqs = db->with_read_transaction([](store::transaction& tx) -> result<std::int64_t> {
    auto r = tx.query("SELECT COUNT(*), MIN(seq), MAX(seq) FROM audit_events");
    if (!r) return r.err();
    auto n = (*r)[0].get_i64(0), lo = (*r)[0].get_i64(1), hi = (*r)[0].get_i64(2);
    if (!n || !lo || !hi) return make_error(errc::internal, "unreadable");
    return *n == *hi - *lo + 1 ? *n : -1;  // gapless
  });
  REQUIRE(seqs.ok());
  CHECK(*seqs == 101);
}

TEST_CASE_FIXTURE(fixture, "the audit table refuses UPDATE and DELETE") {
  auto log = audit_service::audit_log::open(scratch->url());
  REQUIRE(log.ok());
  std::vector<std::string> one = {ev("a", 1)};
  REQUIRE((*log)->append_batch(one).ok());
  auto upd = db->with_transaction([](store::transaction& tx) -> status {
    auto r = tx.exec("UPDATE audit_events SET reason = 'x'");
    if (!r) return r.err();
    return {};
  });
  CHECK_FALSE(upd.ok());
  CHECK(upd.err().message.find("append-only") != std::string::npos);
  auto del = db->with_transaction([](store::transaction& tx) -> status {
    auto r = tx.exec("DELETE FROM audit_events");
    if (!r) return r.err();
    return {};
  });
  CHECK_FALSE(del.ok());
  CHECK((*log)->total() == 1);
}
