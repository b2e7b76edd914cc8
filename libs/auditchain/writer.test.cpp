// chain_writer against a real store (compiled once per engine): anchoring
// cadence, rollback, restart, decryption per row, verification without data
// keys (also after crypto-shredding), and the canary over every stored column.
#include "libs/auditchain/chain_fixture.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace loom::auditchain;
using namespace loom::auditchain::testing;
using loom::errc;
using loom::status;
using store::transaction;
using namespace std::chrono_literals;

namespace loom::auditchain {
struct keyring_test_access {
  static std::vector<std::string> raw_keys(keyring& k) {
    std::lock_guard lock(k.mu_);
    std::vector<std::string> out;
    for (auto& [v, kek] : k.keks_) out.emplace_back(reinterpret_cast<const char*>(kek.key.data()), kek.key.size());
    for (auto& [d, dek] : k.deks_) out.emplace_back(reinterpret_cast<const char*>(dek.key.data()), dek.key.size());
    return out;
  }
};
}  // namespace loom::auditchain

namespace {

std::vector<std::uint64_t> db_checkpoint_seqs(chain_fixture& f) {
  auto cps = f.db->with_read_transaction([&](transaction& tx) { return read_checkpoints(tx); });
  REQUIRE(cps.ok());
  std::vector<std::uint64_t> out;
  for (const auto& c : *cps) out.push_back(c.seq);
  return out;
}

std::vector<std::uint64_t> file_checkpoint_seqs(chain_fixture& f) {
  std::vector<std::uint64_t> out;
  for (const auto& c : f.external()) out.push_back(c.seq);
  return out;
}

}  // namespace

TEST_CASE("the writer anchors every 1,000 records or 60 s of the injected clock, in the database and the file") {
  chain_fixture f("writer_cadence");  // default policy: 1,000 records or 60 s
  event_source ev(1);
  std::mt19937_64 rng(1);
  f.append(2500, ev, rng, 100, 0ms);  // the clock stands still: only the record count counts
  auto seqs = db_checkpoint_seqs(f);
  CHECK(seqs == std::vector<std::uint64_t>{1000, 2000});  // exactly, even inside batches of up to 100
  CHECK(file_checkpoint_seqs(f) == seqs);
  f.clock += 59s;
  f.checkpoint_if_due(false);
  CHECK(db_checkpoint_seqs(f).size() == 2);
  f.clock += 1s;
  f.checkpoint_if_due(false);
  seqs = db_checkpoint_seqs(f);
  REQUIRE(seqs.size() == 3);
  CHECK(seqs[2] == 2500);
  f.clock += 120s;
  f.checkpoint_if_due(false);  // nothing new: no checkpoint
  CHECK(db_checkpoint_seqs(f).size() == 3);
  auto rep = f.verify_all();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.anchors == 3);
  CHECK(rep.anchored_seq == 2500);
}

TEST_CASE("a rolled-back batch leaves no trace and the chain continues from the committed tail") {
  chain_fixture f("writer_rollback");
  event_source ev(2);
  std::mt19937_64 rng(2);
  f.append(30, ev, rng);
  auto failed = f.db->with_transaction([&](transaction& tx) -> status {
    for (int i = 0; i < 5; ++i) {
      auto [row, pt] = ev.next(unix_ns_of(f.clock));
      if (auto a = f.writer->append(tx, std::move(row), pt, f.clock); !a) return a.err();
    }
    return loom::make_error(errc::unavailable, "the batch's commit failed");
  });
  REQUIRE(failed.code() == errc::unavailable);
  f.writer->rolled_back();
  CHECK(f.writer->committed_tail().last_seq == 30);
  f.append(10, ev, rng);
  CHECK(f.rows.back().seq == 40);
  f.checkpoint_if_due(true);
  auto rep = f.verify_all();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.rows == 40);
}

TEST_CASE("a reopened writer continues the chain and its checkpoint cadence where they ended") {
  chain_fixture f("writer_reopen", anchor_policy{.every_records = 100, .every = std::chrono::seconds(60)});
  event_source ev(3);
  std::mt19937_64 rng(3);
  f.append(150, ev, rng, 10, 10ms);
  CHECK(f.writer->anchored_seq() >= 100);
  const auto anchored = f.writer->anchored_seq();
  f.reopen_writer();  // a restart
  CHECK(f.writer->committed_tail() == chain_tail{150, f.rows.back().row_hash});
  CHECK(f.writer->anchored_seq() == anchored);
  f.append(150, ev, rng, 10, 10ms);
  CHECK(db_checkpoint_seqs(f) == std::vector<std::uint64_t>{100, 200, 300});
  auto rep = f.verify_all();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.rows == 300);
}

TEST_CASE("payloads open for their own row, and verification needs no data key even after crypto-shredding") {
  chain_fixture f("writer_shred");
  event_source ev(4);
  std::mt19937_64 rng(4);
  f.append(40, ev, rng, 8, 10ms);
  const auto day0 = day_of(f.clock);
  f.clock += std::chrono::days(1);
  f.append(40, ev, rng, 8, 10ms);
  f.checkpoint_if_due(true);
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    auto pt = f.keys->unseal(f.rows[i].payload, context_of(f.rows[i]));
    REQUIRE_MESSAGE(pt.ok(), why(pt));
    CHECK(*pt == f.plaintexts[i]);
  }
  // Another row's ciphertext does not open here.
  CHECK(f.keys->unseal(f.rows[1].payload, context_of(f.rows[2])).code() == errc::corruption);

  // Retention: on day 181 day 0 may be shredded, day 1 not yet; rows stay and verify.
  const sys_time later = f.clock + std::chrono::days(180);
  CHECK(f.keys->purge(day0 + 1, later).code() == errc::invalid_argument);
  REQUIRE(f.keys->purge(day0, later).ok());
  std::size_t destroyed = 0, readable = 0;
  for (const auto& r : f.rows) {
    auto pt = f.keys->unseal(r.payload, context_of(r));
    if (pt.code() == errc::not_found && why(pt).find("key destroyed") != std::string::npos) ++destroyed;
    if (pt.ok()) ++readable;
  }
  CHECK(destroyed == 40);
  CHECK(readable == 40);
  // Verification with no keyring at all: only the anchor public keys.
  std::filesystem::remove_all(f.keys_dir() + "-copy");
  std::filesystem::create_directories(f.keys_dir() + "-copy");
  std::filesystem::copy_file(f.keys_dir() + "/anchor-" + f.signer->key_id() + ".pub",
                             f.keys_dir() + "-copy/anchor-" + f.signer->key_id() + ".pub");
  verify_options o;
  o.keys_dir = f.keys_dir() + "-copy";
  o.anchor_file = f.anchor_path();
  auto rep = verify_store(*f.db, o);
  REQUIRE(rep.ok());
  CHECK_MESSAGE(rep->ok(), rep->summary());
  CHECK(rep->rows == 80);
}

TEST_CASE("verification reports where its anchors came from and what it could not check") {
  chain_fixture f("writer_notes", anchor_policy{.every_records = 20, .every = std::chrono::seconds(60)});
  event_source ev(5);
  std::mt19937_64 rng(5);
  f.append(50, ev, rng, 5, 10ms);
  verify_options o;
  o.keys_dir = f.keys_dir();
  auto rep = verify_store(*f.db, o);  // no anchor file given
  REQUIRE(rep.ok());
  CHECK(rep->ok());
  CHECK(rep->notes.front().find("database checkpoints only") != std::string::npos);
  CHECK(rep->notes.back().find("not yet anchored") != std::string::npos);
  o.keys_dir = f.dir.path() + "/nowhere";  // no trusted keys: checkpoints cannot be believed
  rep = verify_store(*f.db, o);
  REQUIRE(rep.ok());
  CHECK(rep->kind == fault::anchor_signature);
  CHECK(rep->bad_seq == db_checkpoint_seqs(f).front());
}

TEST_CASE("a new anchor key's file starts with its genesis checkpoint and an emptied or deleted file fails verify") {
  chain_fixture f("writer_genesis");
  auto first = read_anchor_file(f.anchor_path());
  REQUIRE(first.ok());
  REQUIRE(first->checkpoints.size() == 1);
  CHECK(first->checkpoints[0].seq == 0);
  CHECK(first->checkpoints[0].row_hash == genesis_hash);
  CHECK(f.trusted.verify(first->checkpoints[0]).ok());
  // A fresh chain with no rows, and one whose rows are not yet anchored, verify.
  auto rep = f.verify_all();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.rows == 0);
  event_source ev(8);
  std::mt19937_64 rng(8);
  f.append(30, ev, rng, 5, 10ms);
  rep = f.verify_all();
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.notes.back().find("not yet anchored") != std::string::npos);
  for (const auto& n : rep.notes) CHECK(n.find("only in the anchor file") == std::string::npos);

  const std::string saved = *loom::files::read_file(f.anchor_path());
  // Emptied: nothing left to vouch for the chain.
  std::filesystem::resize_file(f.anchor_path(), 0);
  rep = f.verify_all();
  CHECK(rep.kind == fault::anchor_missing);
  CHECK(rep.bad_seq == 1);
  CHECK(rep.reason.find(f.anchor_path() + " holds no checkpoint signed by the 1 trusted anchor key(s)") !=
        std::string::npos);
  CHECK(rep.rows == 30);  // the chain itself was still walked
  // Replaced by lines no trusted key signed.
  auto other = anchor_signer::generate(f.dir.path() + "/other-keys");
  REQUIRE(other.ok());
  {
    auto file = anchor_file::open(f.anchor_path());
    REQUIRE(file.ok());
    REQUIRE((*file)->append(other->sign(0, genesis_hash, 1)).ok());
  }
  CHECK(f.verify_all().kind == fault::anchor_missing);
  // Deleted.
  std::filesystem::remove(f.anchor_path());
  rep = f.verify_all();
  CHECK(rep.kind == fault::anchor_missing);
  CHECK(rep.reason.find(f.anchor_path() + " does not exist") != std::string::npos);
  // Restored: verifies again.
  REQUIRE(loom::files::write_atomic(f.anchor_path(), saved, 0644).ok());
  CHECK_MESSAGE(f.verify_all().ok(), f.verify_all().summary());
  // Without a trusted key nothing is required of the file (and nothing proven).
  verify_options o;
  o.keys_dir = f.dir.path() + "/nowhere";
  o.anchor_file = f.dir.path() + "/missing.log";
  auto bare = verify_store(*f.db, o);
  REQUIRE(bare.ok());
  CHECK(bare->ok());
}

TEST_CASE("a chain emptied below its checkpoints is truncated at seq 1, even with the database checkpoints gone") {
  chain_fixture f("writer_wiped", anchor_policy{.every_records = 20, .every = std::chrono::seconds(60)});
  event_source ev(9);
  std::mt19937_64 rng(9);
  f.append(50, ev, rng, 5, 10ms);
  auto wiped = f.db->with_transaction([&](transaction& tx) -> status {
    if (auto s = tx.exec_script(drop_append_only_sql(engine, "audit_events") +
                                drop_append_only_sql(engine, "audit_checkpoints"));
        !s)
      return s;
    if (auto d = tx.exec("DELETE FROM audit_events"); !d) return d.err();
    if (auto d = tx.exec("DELETE FROM audit_checkpoints"); !d) return d.err();
    return loom::ok_status();
  });
  REQUIRE_MESSAGE(wiped.ok(), why(wiped));
  auto rep = f.verify_all();
  CHECK(rep.kind == fault::truncated);
  CHECK(rep.bad_seq == 1);
  CHECK(rep.anchor_seq == 40);
  CHECK(rep.summary() == "truncated at seq 1: truncated: anchor at seq 40 but the log ends at 0");
}

TEST_CASE("canary: no key and no plaintext ever appears in a stored column") {
  chain_fixture f("writer_canary");
  event_source ev(6);
  std::mt19937_64 rng(6);
  const std::string canary = "CANARY-secret-token-4b1d";
  std::size_t n = 0;
  auto r = f.db->with_transaction([&](transaction& tx) -> status {
    for (int i = 0; i < 60; ++i) {
      auto [row, pt] = ev.next(unix_ns_of(f.clock));
      pt = canary + std::to_string(i) + pt;
      f.clock += std::chrono::hours(12);  // several day keys
      if (auto a = f.writer->append(tx, std::move(row), pt, f.clock); !a) return a.err();
      ++n;
    }
    return loom::ok_status();
  });
  REQUIRE(r.ok());
  REQUIRE(f.writer->committed().ok());
  (void)f.keys->rotate(f.clock);
  f.checkpoint_if_due(true);

  std::vector<std::string> secrets = keyring_test_access::raw_keys(*f.keys);
  REQUIRE(secrets.size() >= 2 + 30);  // two KEKs, a day key per day
  auto pem = loom::files::read_file(f.keys_dir() + "/anchor-signing.key");
  REQUIRE(pem.ok());
  std::vector<std::string> needles = {canary};
  for (const auto& s : secrets) {
    needles.push_back(s);
    needles.push_back(loom::crypto::to_hex(s));
  }
  // The PEM body (base64 of the PKCS#8 key) and its middle line.
  needles.push_back(pem->substr(pem->find('\n') + 1, 40));

  std::size_t cells = 0, hits = 0;
  for (const char* table : {"audit_events", "audit_checkpoints"}) {
    auto rows = f.db->with_read_transaction(
        [&](transaction& tx) { return tx.query(std::string("SELECT * FROM ") + table); });
    REQUIRE(rows.ok());
    for (const auto& row : *rows)
      for (std::size_t c = 0; c < row.size(); ++c) {
        std::string cell;
        if (auto* s = std::get_if<std::string>(&row[c])) cell = *s;
        if (auto* b = std::get_if<store::blob>(&row[c])) cell = b->bytes;
        ++cells;
        for (const auto& needle : needles) hits += cell.find(needle) != std::string::npos;
      }
  }
  CHECK(cells > n * 17 - 1);
  CHECK(hits == 0);
  // And the anchor file holds nothing secret either.
  auto anchors = loom::files::read_file(f.anchor_path());
  REQUIRE(anchors.ok());
  for (const auto& needle : needles) CHECK(anchors->find(needle) == std::string::npos);
}
