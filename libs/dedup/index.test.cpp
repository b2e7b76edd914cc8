#include "libs/dedup/index.hpp"

#include "libs/dedup/testing.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

using namespace loom;
using namespace loom::dedup;

namespace {

struct entry {
  doc_id id;
  std::string text;
};

std::vector<drop> all_drops(const verdicts& v) {
  auto r = v.reader();
  REQUIRE(r.ok());
  std::vector<drop> out;
  for (;;) {
    auto d = r->next();
    REQUIRE(d.ok());
    if (!*d) return out;
    out.push_back(**d);
  }
}

verdicts run(const std::vector<entry>& docs, options o = {}) {
  auto ix = index::create(std::move(o));
  REQUIRE(ix.ok());
  for (const auto& e : docs) {
    auto s = ix->add(e.id, e.text);
    REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  }
  auto v = ix->finish();
  REQUIRE_MESSAGE(v.ok(), v.err().to_string());
  return std::move(*v);
}

bool same(const std::vector<drop>& a, const std::vector<drop>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].id != b[i].id || a[i].kept_by != b[i].kept_by || a[i].why != b[i].why) return false;
  return true;
}

// A few hundred planted documents from Debian prose, ids in a shuffled order.
std::vector<entry> small_corpus() {
  static const auto docs = [] {
    testing::planted_sizes sz;
    sz.bases = 400, sz.exact = 80, sz.near = 160, sz.appended = 40, sz.far = 40;
    return testing::make_planted(testing::debian_texts(), sz, 4242);
  }();
  std::vector<entry> out;
  std::mt19937_64 rng(5);
  std::vector<std::uint64_t> rank(docs.size());
  std::iota(rank.begin(), rank.end(), 0);
  std::shuffle(rank.begin(), rank.end(), rng);
  for (std::size_t i = 0; i < docs.size(); ++i) out.push_back({{rank[i] % 7, rank[i]}, docs[i].text});
  return out;
}

const std::string prose =
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software "
    "and associated documentation files, to deal in the Software without restriction, including "
    "without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, "
    "and/or sell copies of the Software, and to permit persons to whom the Software is furnished to "
    "do so, subject to the following conditions: the above copyright notice and this permission notice "
    "shall be included in all copies or substantial portions of the Software.";

}  // namespace

TEST_CASE("of identical documents the one with the smallest id is kept, whatever the add order") {
  const std::vector<entry> docs = {{{5, 0}, prose}, {{1, 7}, prose + "\n"}, {{1, 3}, "  " + prose}, {{0, 9}, "other"}};
  for (int perm = 0; perm < 6; ++perm) {
    std::vector<entry> d = docs;
    std::mt19937 rng(perm);
    std::shuffle(d.begin(), d.end(), rng);
    const auto drops = all_drops(run(d));
    REQUIRE(drops.size() == 2);
    CHECK(drops[0].id == doc_id{1, 7});
    CHECK(drops[1].id == doc_id{5, 0});
    for (const auto& x : drops) {
      CHECK(x.kept_by == doc_id{1, 3});
      CHECK(x.why == reason::exact);
    }
  }
}

TEST_CASE("a case-changed copy is a near duplicate and a rewording of half the text is kept") {
  std::string upper = prose;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  std::string half = prose.substr(0, prose.size() / 2) + " and then something else entirely, said in other words "
                                                         "by a different author for a different reader";
  const auto v = run({{{0, 0}, prose}, {{0, 1}, upper}, {{0, 2}, half}});
  const auto drops = all_drops(v);
  REQUIRE(drops.size() == 1);
  CHECK(drops[0].id == doc_id{0, 1});
  CHECK(drops[0].why == reason::near);
  CHECK(drops[0].kept_by == doc_id{0, 0});
  CHECK(v.stats().near_dropped == 1);
  CHECK(v.stats().exact_dropped == 0);
  CHECK(v.stats().clusters == 1);
}

TEST_CASE("documents without words are deduplicated exactly and never as near duplicates") {
  const auto drops = all_drops(run({{{0, 0}, "... !!!"}, {{0, 1}, "...   !!!"}, {{0, 2}, "?? --"}, {{0, 3}, ""}, {{0, 4}, " "}}));
  REQUIRE(drops.size() == 2);
  CHECK(drops[0].id == doc_id{0, 1});
  CHECK(drops[0].kept_by == doc_id{0, 0});
  CHECK(drops[1].id == doc_id{0, 4});
  CHECK(drops[1].kept_by == doc_id{0, 3});
}

TEST_CASE("exact-only mode keeps near duplicates") {
  std::string edited = prose;
  edited.replace(edited.find("charge"), 6, "cost");
  options o;
  o.fuzzy = false;
  const auto drops = all_drops(run({{{0, 0}, prose}, {{0, 1}, edited}, {{0, 2}, prose}}, o));
  REQUIRE(drops.size() == 1);
  CHECK(drops[0].id == doc_id{0, 2});
  const auto fuzzy = all_drops(run({{{0, 0}, prose}, {{0, 1}, edited}, {{0, 2}, prose}}));
  CHECK(fuzzy.size() == 2);
}

TEST_CASE("verdicts do not depend on the order documents are added in") {
  auto docs = small_corpus();
  const auto ref = all_drops(run(docs));
  CHECK(ref.size() > 100);
  for (int seed = 1; seed <= 3; ++seed) {
    std::mt19937_64 rng(seed);
    std::shuffle(docs.begin(), docs.end(), rng);
    CHECK(same(all_drops(run(docs)), ref));
  }
  // The keeper of each cluster is its smallest id.
  for (const auto& d : ref) CHECK(d.kept_by < d.id);
}

TEST_CASE("a tiny memory budget spills sorted runs to disk and gives the same verdicts") {
  const auto docs = small_corpus();
  options big;
  big.memory_budget = std::size_t{1} << 30;
  const auto in_memory = run(docs, big);
  CHECK(in_memory.stats().runs_written == 0);
  CHECK(in_memory.stats().bytes_spilled == 0);

  files::temp_dir dir("loom-dedup-test");
  options tiny;
  tiny.memory_budget = 64 << 10;
  tiny.work_dir = dir.path();
  std::vector<entry> shuffled = docs;
  std::mt19937_64 rng(11);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  {
    const auto spilled = run(shuffled, tiny);
    MESSAGE("tiny budget: runs " << spilled.stats().runs_written << ", spilled " << spilled.stats().bytes_spilled
                                 << " B, tracked peak " << spilled.stats().tracked_peak_bytes << " B");
    CHECK(spilled.stats().runs_written > 20);  // more runs than the merge fan-in (7 here): extra passes ran
    CHECK(spilled.stats().tracked_peak_bytes <= tiny.memory_budget);
    CHECK(same(all_drops(spilled), all_drops(in_memory)));
    CHECK(spilled.stats().exact_dropped == in_memory.stats().exact_dropped);
    CHECK(spilled.stats().near_dropped == in_memory.stats().near_dropped);
    CHECK(spilled.stats().candidate_pairs == in_memory.stats().candidate_pairs);
    CHECK(!std::filesystem::is_empty(dir.path()));
  }
  CHECK(std::filesystem::is_empty(dir.path()));  // scratch removed with the last owner
}

TEST_CASE("a reader answers lookups in id order and seeks to a source") {
  const auto v = run(small_corpus());
  const auto drops = all_drops(v);
  REQUIRE(drops.size() > 10);
  auto r = v.reader();
  REQUIRE(r.ok());
  // Every id of sources 0..6 and records 0..N, in order: dropped ones are found, others are not.
  std::size_t found = 0, next = 0;
  for (std::uint64_t src = 0; src < 7; ++src)
    for (std::uint64_t rec = 0; rec < 1500; ++rec) {
      const doc_id id{src, rec};
      auto d = r->lookup(id);
      REQUIRE(d.ok());
      const bool want = next < drops.size() && drops[next].id == id;
      CHECK(d->has_value() == want);
      if (want) {
        CHECK((*d)->kept_by == drops[next].kept_by);
        ++found, ++next;
      }
    }
  CHECK(found == drops.size());
  const auto first3 = std::find_if(drops.begin(), drops.end(), [](const drop& d) { return d.id.source >= 3; });
  REQUIRE(r->seek({3, 0}).ok());
  auto d = r->next();
  REQUIRE(d.ok());
  REQUIRE(d->has_value());
  CHECK((*d)->id == first3->id);
}

TEST_CASE("the budget caps the documents an index accepts") {
  options o;
  o.memory_budget = 64 << 10;  // finish() needs 4.25 B per document in half the budget: 7710
  auto ix = index::create(o);
  REQUIRE(ix.ok());
  fingerprinter f;
  const auto fp = f.compute(prose);
  std::uint64_t n = 0;
  status s;
  while ((s = ix->add({0, n}, fp)).ok()) ++n;
  CHECK(s.code() == errc::resource_exhausted);
  CHECK(n == 7710);
  auto v = ix->finish();
  REQUIRE(v.ok());
  CHECK(v->stats().exact_dropped == n - 1);
  CHECK(v->stats().clusters == 1);
}

TEST_CASE("bad options and misuse are refused") {
  options o;
  o.memory_budget = 1000;
  CHECK(index::create(o).code() == errc::invalid_argument);
  o = {};
  o.min_similarity = 0;
  CHECK(index::create(o).code() == errc::invalid_argument);
  o.min_similarity = 1.5;
  CHECK(index::create(o).code() == errc::invalid_argument);
  o = {};
  o.work_dir = "/nonexistent/loom-dedup";
  CHECK(index::create(o).code() == errc::not_found);

  auto ix = index::create({});
  REQUIRE(ix.ok());
  REQUIRE(ix->add({0, 0}, prose).ok());
  REQUIRE(ix->add({0, 0}, prose).ok());  // a repeated id is caught at finish
  CHECK(ix->finish().code() == errc::invalid_argument);
  CHECK(ix->finish().code() == errc::invalid_argument);
  CHECK(ix->add({0, 1}, prose).code() == errc::invalid_argument);
}

TEST_CASE("a scratch directory that cannot be made fails the add that spills, with the path") {
  auto dir = std::make_unique<files::temp_dir>("loom-dedup-gone");
  options o;
  o.memory_budget = 64 << 10;
  o.work_dir = dir->path() + "/sub";
  std::filesystem::create_directory(o.work_dir);
  auto ix = index::create(o);
  REQUIRE(ix.ok());
  std::filesystem::remove(o.work_dir);
  status s;
  for (std::uint64_t i = 0; i < 1000 && s.ok(); ++i) s = ix->add({0, i}, prose + std::to_string(i));
  REQUIRE(!s.ok());
  CHECK(s.code() == errc::not_found);
  CHECK(s.err().message.find(o.work_dir) != std::string::npos);
}
