#include "libs/auditchain/verifier.hpp"

#include "libs/auditchain/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace loom::auditchain;

namespace {

std::vector<chain_row> make_chain(std::size_t n, std::uint64_t seed) {
  testing::event_source ev(seed);
  row_hasher h;
  chain_tail tail;
  std::vector<chain_row> rows;
  for (std::size_t i = 0; i < n; ++i) {
    auto [r, pt] = ev.next(static_cast<std::int64_t>(i) * 1000);
    r.payload = pt;  // the chain does not care whether it is sealed
    link(tail, r, h);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<anchor> anchors_every(const std::vector<chain_row>& rows, std::size_t step) {
  std::vector<anchor> a;
  for (std::size_t i = step; i <= rows.size(); i += step)
    a.push_back(anchor{.seq = i, .row_hash = rows[i - 1].row_hash, .authentic = true, .origin = "test", .problem = ""});
  return a;
}

verify_report run(const std::vector<chain_row>& rows, std::vector<anchor> anchors, std::uint64_t from = 1) {
  hash32 start = from > 1 ? rows[from - 2].row_hash : genesis_hash;
  chain_verifier v(from, start, std::move(anchors));
  for (const auto& r : rows)
    if (r.seq >= from && !v.feed(r)) break;
  return v.finish();
}

// Recomputes prev/row hashes from index i on, as an attacker without keys can.
void rechain(std::vector<chain_row>& rows, std::size_t i) {
  for (; i < rows.size(); ++i) {
    rows[i].prev_hash = i == 0 ? genesis_hash : rows[i - 1].row_hash;
    rows[i].row_hash = compute_row_hash(rows[i].prev_hash, rows[i]);
  }
}

}  // namespace

TEST_CASE("a clean chain verifies and reports what it proved") {
  auto rows = make_chain(250, 2);
  auto rep = run(rows, anchors_every(rows, 100));
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.rows == 250);
  CHECK(rep.last_seq == 250);
  CHECK(rep.anchors == 2);
  CHECK(rep.anchored_seq == 200);
  REQUIRE(rep.notes.size() == 1);
  CHECK(rep.notes[0].find("rows 201..250") != std::string::npos);
}

TEST_CASE("an empty chain verifies") {
  chain_verifier v(1, genesis_hash, {});
  auto rep = v.finish();
  CHECK(rep.ok());
  CHECK(rep.rows == 0);
}

TEST_CASE("a deleted row is a gap at its seq") {
  auto rows = make_chain(50, 3);
  rows.erase(rows.begin() + 20);  // seq 21
  auto rep = run(rows, {});
  CHECK(rep.kind == fault::gap);
  CHECK(rep.bad_seq == 21);
  CHECK(rep.reason.find("seq 21 is missing") != std::string::npos);
}

TEST_CASE("a changed column is a hash mismatch at its row") {
  auto rows = make_chain(50, 4);
  rows[9].reason += "!";
  auto rep = run(rows, {});
  CHECK(rep.kind == fault::hash_mismatch);
  CHECK(rep.bad_seq == 10);
}

TEST_CASE("swapped row contents are a prev mismatch at the first of the two") {
  auto rows = make_chain(50, 5);
  std::swap(rows[11], rows[30]);
  std::swap(rows[11].seq, rows[30].seq);
  auto rep = run(rows, {});
  CHECK(rep.kind == fault::prev_mismatch);
  CHECK(rep.bad_seq == 12);
}

TEST_CASE("a recomputed chain is caught by the next checkpoint, naming the unproven range") {
  auto rows = make_chain(300, 6);
  auto anchors = anchors_every(rows, 100);
  rows[149].principal = "mallory";
  rechain(rows, 149);
  auto plain = run(rows, {});
  CHECK(plain.ok());  // without anchors the forgery is consistent
  auto rep = run(rows, anchors);
  CHECK(rep.kind == fault::anchor_mismatch);
  CHECK(rep.bad_seq == 101);
  CHECK(rep.anchor_seq == 200);
  CHECK(rep.reason.find("rows 101..200") != std::string::npos);
}

TEST_CASE("a log that ends below a checkpoint is truncated") {
  auto rows = make_chain(300, 7);
  auto anchors = anchors_every(rows, 100);
  rows.resize(250);
  auto rep = run(rows, anchors);
  CHECK(rep.kind == fault::truncated);
  CHECK(rep.bad_seq == 251);
  CHECK(rep.reason == "truncated: anchor at seq 300 but the log ends at 250");
}

TEST_CASE("a checkpoint whose signature failed is a fault at its seq") {
  auto rows = make_chain(300, 8);
  auto anchors = anchors_every(rows, 100);
  anchors[1].authentic = false;
  anchors[1].problem = "has an invalid signature";
  auto rep = run(rows, anchors);
  CHECK(rep.kind == fault::anchor_signature);
  CHECK(rep.bad_seq == 200);
  // A planted checkpoint above the end of the log.
  anchors = anchors_every(rows, 100);
  anchors.push_back(anchor{.seq = 400, .row_hash = {}, .authentic = false, .origin = "database", .problem = "forged"});
  rep = run(rows, anchors);
  CHECK(rep.kind == fault::anchor_signature);
  CHECK(rep.bad_seq == 400);
}

TEST_CASE("verification can start at any seq from the previous row's hash") {
  auto rows = make_chain(300, 9);
  auto anchors = anchors_every(rows, 100);
  auto rep = run(rows, anchors, 150);
  CHECK_MESSAGE(rep.ok(), rep.summary());
  CHECK(rep.rows == 151);
  CHECK(rep.from_seq == 150);
  CHECK(rep.anchors == 2);
  rows[159].job_id = "other";
  rep = run(rows, anchors, 150);
  CHECK(rep.kind == fault::hash_mismatch);
  CHECK(rep.bad_seq == 160);
  // A fault before the start is not seen.
  rep = run(rows, anchors, 161);
  CHECK(rep.ok());
}
