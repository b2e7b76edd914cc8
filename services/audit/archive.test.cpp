// Audit retention (issue 32 item 5): records past the retention move to an
// archive file that `loom audit verify --archive` checks end to end with the
// live chain; a changed or missing file fails verify naming it; the store
// refuses to delete a young record, an unarchived one or the newest, even for
// an archiver whose clock runs 400 days ahead. The same suite on SQLite and
// PostgreSQL ([sqlite] / [postgres]).
#include "libs/auditchain/archive.hpp"
#include "libs/auditchain/store_io.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "loom/v1/audit.pb.h"
#include "services/audit/archive.hpp"
#include "services/audit/audit_log.hpp"
#include "services/audit/schema.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace loom;
using namespace std::chrono_literals;

namespace {
constexpr store::backend engine = store::testing::suite_backend;
using sys_clock = std::chrono::system_clock;

std::int64_t ns(sys_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string ev(std::uint64_t seq, sys_clock::time_point at, const std::string& source = "scheduler@test") {
  v1::AuditEvent e;
  e.set_source(source);
  e.set_source_seq(seq);
  e.set_unix_ns(static_cast<std::uint64_t>(ns(at)));
  e.set_principal("op-a");
  e.set_action("loom.v1.SubmitJobRequest");
  e.set_job_id("job-" + std::to_string(seq % 7));
  e.set_decision(v1::ALLOW);
  e.set_payload("{\"n\":" + std::to_string(seq) + "}");
  return e.SerializeAsString();
}

template <class R>
std::string why(const R& r) {
  return r.ok() ? std::string() : r.err().to_string();
}

struct fixture {
  files::temp_dir dir{"auditarchive"};
  result<store::testing::scratch> scratch = store::testing::scratch::make(engine, "auditarchive");
  std::unique_ptr<store::database> db;
  sys_clock::time_point now = sys_clock::now();
  sys_clock::time_point clock = now - std::chrono::days(300);  // the audit log's injected clock
  std::unique_ptr<audit_service::audit_log> log;
  std::uint64_t next_seq = 1;

  fixture() {
    REQUIRE(scratch.ok());
    auto d = store::database::open(scratch->url());
    REQUIRE(d.ok());
    db = std::move(*d);
    REQUIRE(store::migrate(*db, audit_service::audit_migrations()).ok());
    audit_service::audit_log_options o;
    o.url = scratch->url();
    o.keys_dir = dir.path() + "/keys";
    o.anchor_path = dir.path() + "/anchors.log";
    o.clock = [this] { return clock; };
    auto l = audit_service::audit_log::open(std::move(o));
    REQUIRE_MESSAGE(l.ok(), why(l));
    log = std::move(*l);
  }
  std::string archive_dir() const { return dir.path() + "/archive"; }
  // `n` events stamped `at` (the log's clock moved there), then a signed checkpoint.
  void append(int n, sys_clock::time_point at) {
    clock = at;
    std::vector<std::string> batch;
    for (int i = 0; i < n; ++i) batch.push_back(ev(next_seq++, at));
    auto out = log->append_batch(batch);
    REQUIRE_MESSAGE(out.ok(), why(out));
    REQUIRE(out->stored == static_cast<std::uint64_t>(n));
    auto t = log->tick(true);
    REQUIRE_MESSAGE(t.ok(), why(t));
  }
  auditchain::verify_report verify(const std::string& archives = "") {
    auditchain::verify_options o;
    o.keys_dir = dir.path() + "/keys";
    o.anchor_file = dir.path() + "/anchors.log";
    o.archive_dir = archives;
    auto r = auditchain::verify_store(*db, o);
    REQUIRE_MESSAGE(r.ok(), why(r));
    return *r;
  }
  std::int64_t live_rows() {
    auto n = db->with_read_transaction([](store::transaction& tx) -> result<std::int64_t> {
      auto r = tx.query("SELECT COUNT(*) FROM audit_events");
      if (!r) return r.err();
      return std::get<std::int64_t>((*r)[0][0]);
    });
    REQUIRE(n.ok());
    return *n;
  }
  std::size_t archive_entries() {
    auto e = db->with_read_transaction([](store::transaction& tx) { return auditchain::read_archive_entries(tx); });
    REQUIRE(e.ok());
    return e->size();
  }
  result<audit_service::archive_outcome> archive(sys_clock::time_point at, bool dry = false) {
    audit_service::archive_request r;
    r.dry_run = dry;
    return audit_service::archive_old(*db, archive_dir(), r, at);
  }
  status sql(const std::string& statement) {
    return db->with_transaction([&](store::transaction& tx) -> status {
      auto r = tx.exec(statement);
      if (!r) return r.err();
      return {};
    });
  }
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE_FIXTURE(fixture, "records past the retention move to an archive that verifies end to end with the live chain") {
  append(100, now - std::chrono::days(300));
  append(150, now - std::chrono::days(200));  // checkpoints at 100 and 250
  append(50, now - std::chrono::days(10));    // young: stays
  REQUIRE(verify().ok());

  auto dry = archive(now, true);
  REQUIRE_MESSAGE(dry.ok(), why(dry));
  CHECK(dry->entry.first_seq == 1);
  CHECK(dry->entry.last_seq == 250);
  CHECK(live_rows() == 300);  // a dry run moves nothing
  CHECK_FALSE(std::filesystem::exists(archive_dir() + "/" + dry->entry.file));

  auto done = archive(now);
  REQUIRE_MESSAGE(done.ok(), why(done));
  CHECK(done->entry.first_seq == 1);
  CHECK(done->entry.last_seq == 250);  // the last checkpoint before the first young record
  CHECK(done->entry.rows == 250);
  CHECK(done->live_first == 251);
  CHECK(done->entry.oldest_ns == ns(now - std::chrono::days(300)));
  CHECK(done->entry.newest_ns == ns(now - std::chrono::days(200)));
  CHECK(live_rows() == 50);
  CHECK(archive_entries() == 1);
  auto file = files::read_file(archive_dir() + "/" + done->entry.file);
  REQUIRE(file.ok());
  CHECK(has(*file, "\"principal\":\"op-a\""));
  CHECK(std::filesystem::status(archive_dir() + "/" + done->entry.file).permissions() ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));

  // The live rows alone verify from the hash after the archive, and say so.
  auto live = verify();
  CHECK_MESSAGE(live.ok(), live.summary());
  CHECK(live.from_seq == 251);
  CHECK(live.rows == 50);
  bool noted = false;
  for (const auto& n : live.notes) noted = noted || has(n, "seqs 1..250 are archived");
  CHECK(noted);
  // With the archive: one chain from seq 1, every checkpoint matched.
  auto whole = verify(archive_dir());
  CHECK_MESSAGE(whole.ok(), whole.summary());
  CHECK(whole.from_seq == 1);
  CHECK(whole.rows == 300);
  CHECK(whole.anchored_seq == 300);

  // Nothing more is old enough; the writer goes on after reopening.
  auto again = archive(now);
  REQUIRE(again.ok());
  CHECK(again->entry.rows == 0);
  CHECK(has(again->why_none, "younger than 180 days"));
  REQUIRE(log->reload().ok());
  append(5, now);
  CHECK(log->total() == 305);
  auto after = verify(archive_dir());
  CHECK_MESSAGE(after.ok(), after.summary());
  CHECK(after.rows == 305);

  // A second segment once more records age: 180 days later, seqs 251..300
  // (closed by the checkpoint at 300) go too; the newest, 305, stays.
  auto later = archive(now + std::chrono::days(200));
  // By the database's clock those records are 10 days old: refused there.
  REQUIRE_FALSE(later.ok());
  CHECK_MESSAGE(has(later.err().message, "180-day retention"), later.err().message);
  CHECK(live_rows() == 55);
  CHECK(archive_entries() == 1);
}

TEST_CASE_FIXTURE(fixture, "a changed, missing or foreign archive file fails verify naming the file") {
  append(100, now - std::chrono::days(300));
  append(10, now);
  auto done = archive(now);
  REQUIRE_MESSAGE(done.ok(), why(done));
  REQUIRE(done->entry.rows == 100);
  const std::string path = archive_dir() + "/" + done->entry.file;
  REQUIRE(verify(archive_dir()).ok());

  auto original = files::read_file(path);
  REQUIRE(original.ok());
  SUBCASE("one changed byte") {
    std::string bad = *original;
    auto at = bad.find("op-a", bad.size() / 2);
    REQUIRE(at != std::string::npos);
    bad[at + 3] = 'b';
    REQUIRE(files::write_atomic(path, bad, 0600).ok());
    auto rep = verify(archive_dir());
    CHECK(rep.kind == auditchain::fault::archive);
    CHECK(rep.bad_seq == 1);
    CHECK_MESSAGE(has(rep.reason, path), rep.reason);
    CHECK_MESSAGE(has(rep.reason, "SHA-256"), rep.reason);
  }
  SUBCASE("missing") {
    std::filesystem::remove(path);
    auto rep = verify(archive_dir());
    CHECK(rep.kind == auditchain::fault::archive);
    CHECK_MESSAGE(has(rep.reason, "is missing"), rep.reason);
    CHECK_MESSAGE(has(rep.reason, path), rep.reason);
    // Without --archive the live rows still verify, and the note says where the rest went.
    CHECK(verify().ok());
  }
  SUBCASE("cut short") {
    REQUIRE(files::write_atomic(path, original->substr(0, original->size() / 2), 0600).ok());
    auto rep = verify(archive_dir());
    CHECK(rep.kind == auditchain::fault::archive);
    CHECK_MESSAGE(has(rep.reason, path), rep.reason);
  }
  // The parser names the line of a file that is not an archive.
  REQUIRE(files::write_atomic(dir.path() + "/not-an-archive.jsonl", "{\"format\":\"other\"}\n", 0600).ok());
  auto other = auditchain::read_archive(dir.path() + "/not-an-archive.jsonl");
  REQUIRE_FALSE(other.ok());
  CHECK(other.code() == errc::corruption);
  CHECK_MESSAGE(has(other.err().message, "line 1"), other.err().message);
}

TEST_CASE_FIXTURE(fixture, "the store refuses to delete a young, unarchived or newest record, whoever asks") {
  append(20, now - std::chrono::days(1));
  append(1, now);
  // An archiver whose clock runs 400 days ahead believes the records old:
  // the store's clock disagrees and nothing is deleted or left behind.
  auto ahead = archive(now + std::chrono::days(400));
  REQUIRE_FALSE(ahead.ok());
  CHECK_MESSAGE(has(ahead.err().message, "180-day retention"), ahead.err().message);
  CHECK_MESSAGE(has(ahead.err().message, "nothing archived"), ahead.err().message);
  CHECK(live_rows() == 21);
  CHECK(archive_entries() == 0);
  CHECK((!std::filesystem::exists(archive_dir()) || std::filesystem::is_empty(archive_dir())));
  CHECK(verify().ok());

  // A SQL prompt is refused just the same: young rows, even when listed as archived.
  auto young = sql("DELETE FROM audit_events WHERE seq = 1");
  REQUIRE_FALSE(young.ok());
  CHECK_MESSAGE(has(young.err().message, "180-day retention"), young.err().message);
  CHECK_FALSE(sql("UPDATE audit_events SET reason = 'x' WHERE seq = 1").ok());
  CHECK(live_rows() == 21);
}

TEST_CASE_FIXTURE(fixture, "an old record is deleted only once archived, and never the newest") {
  append(10, now - std::chrono::days(400));
  append(1, now - std::chrono::days(390));
  auto unarchived = sql("DELETE FROM audit_events WHERE seq = 1");
  REQUIRE_FALSE(unarchived.ok());
  CHECK_MESSAGE(has(unarchived.err().message, "audit_archives"), unarchived.err().message);
  // Everything old: the archive stops before the newest record, at the
  // checkpoint of seq 10.
  auto done = archive(now);
  REQUIRE_MESSAGE(done.ok(), why(done));
  CHECK(done->entry.last_seq == 10);
  CHECK(live_rows() == 1);
  // A forged audit_archives row claiming the newest record is not enough.
  auto forged = sql("INSERT INTO audit_archives (first_seq, last_seq, rows, prev_hash, last_hash, oldest_ns, "
                    "newest_ns, created_ns, file, sha256) SELECT 11, 11, 1, prev_hash, row_hash, 0, 0, 0, 'x', 'y' "
                    "FROM audit_events WHERE seq = 11");
  REQUIRE_MESSAGE(forged.ok(), why(forged));
  CHECK_FALSE(sql("DELETE FROM audit_archives").ok());  // the index of archives is append-only
  CHECK_FALSE(sql("UPDATE audit_archives SET sha256 = 'z'").ok());
  auto newest = sql("DELETE FROM audit_events WHERE seq = 11");
  REQUIRE_FALSE(newest.ok());
  CHECK_MESSAGE(has(newest.err().message, "newest"), newest.err().message);
  CHECK(live_rows() == 1);
}

TEST_CASE_FIXTURE(fixture, "a source whose every record was archived keeps its watermark, and its next record is stored") {
  clock = now - std::chrono::days(300);
  std::vector<std::string> old;
  for (std::uint64_t i = 1; i <= 40; ++i) old.push_back(ev(i, clock, "cli@gone-host"));
  REQUIRE(log->append_batch(old).ok());
  REQUIRE(log->tick(true).ok());
  append(3, now);
  auto done = archive(now);
  REQUIRE_MESSAGE(done.ok(), why(done));
  REQUIRE(done->entry.last_seq == 40);
  // Reopened (a restart, a new leader): the watermark comes from audit_archive_sources.
  REQUIRE(log->reload().ok());
  CHECK(log->watermark("cli@gone-host") == 40);
  CHECK(log->watermark("scheduler@test") == 3);
  std::vector<std::string> next = {ev(40, now, "cli@gone-host"), ev(41, now, "cli@gone-host")};
  clock = now;
  auto out = log->append_batch(next);
  REQUIRE(out.ok());
  CHECK(out->duplicate == 1);  // 40 was stored before it was archived
  CHECK(out->stored == 1);
  CHECK(out->gap == 0);
  CHECK(log->watermark("cli@gone-host") == 41);
  CHECK(verify(archive_dir()).ok());
}
