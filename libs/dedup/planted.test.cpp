// Issue 5's dedup acceptance test: planted exact and near duplicates (Jaccard >=
// 0.8) in real Debian prose are found with recall >= 0.95 and precision >= 0.99.
#include "libs/dedup/index.hpp"
#include "libs/dedup/testing.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>

using namespace loom::dedup;
using loom::dedup::testing::kind;

namespace {

struct tally {
  std::size_t planted = 0, found = 0;
  double recall() const { return planted ? static_cast<double>(found) / planted : 1.0; }
};

}  // namespace

TEST_CASE("planted exact and near duplicates in Debian prose are found with recall 0.95 and precision 0.99") {
  const auto texts = testing::debian_texts();
  REQUIRE_MESSAGE(texts.size() >= 20, "needs /usr/share/common-licenses and /usr/share/doc/*/copyright");
  const auto docs = testing::make_planted(texts, {}, 0x5eed);
  REQUIRE(docs.size() > 2000);

  // Ids in a shuffled order, so copies often outrank their originals; added in another.
  std::mt19937_64 rng(99);
  std::vector<std::size_t> rank(docs.size());
  std::iota(rank.begin(), rank.end(), 0);
  std::shuffle(rank.begin(), rank.end(), rng);
  auto id_of = [&](std::size_t i) { return doc_id{rank[i] / 64, rank[i] % 64}; };
  std::map<doc_id, std::size_t> doc_of;
  for (std::size_t i = 0; i < docs.size(); ++i) doc_of[id_of(i)] = i;
  std::vector<std::size_t> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);

  auto ix = index::create({});
  REQUIRE(ix.ok());
  for (auto i : order) REQUIRE(ix->add(id_of(i), docs[i].text).ok());
  auto v = ix->finish();
  REQUIRE(v.ok());
  auto rd = v->reader();
  REQUIRE(rd.ok());

  std::vector<std::size_t> keeper(docs.size());  // the document kept for each one's cluster
  std::iota(keeper.begin(), keeper.end(), 0);
  std::vector<reason> why(docs.size(), reason::kept);
  std::vector<std::size_t> dropped;
  for (;;) {
    auto d = rd->next();
    REQUIRE(d.ok());
    if (!*d) break;
    const std::size_t i = doc_of.at((*d)->id);
    keeper[i] = doc_of.at((*d)->kept_by);
    why[i] = (*d)->why;
    dropped.push_back(i);
  }
  for (auto i : dropped) CHECK(why[keeper[i]] == reason::kept);  // a keeper is never dropped

  // Families: a base with its exact and near copies. Far copies and bases stand alone;
  // gray copies (0.55 <= J < 0.8) may go either way and are left out of precision.
  auto family = [&](std::size_t i) {
    const auto& d = docs[i];
    return (d.k == kind::exact || d.k == kind::near || d.k == kind::gray) ? static_cast<std::size_t>(d.base) : i;
  };

  // Recall per kind: the copy ended in its original's cluster.
  std::map<kind, tally> rec;
  std::map<int, tally> near_by_j;  // J bins of 0.05 from 0.80
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const auto& d = docs[i];
    if (d.k == kind::base) continue;
    const bool found = keeper[i] == keeper[static_cast<std::size_t>(d.base)];
    auto& t = rec[d.k];
    ++t.planted;
    t.found += found;
    if (d.k == kind::near) {
      auto& b = near_by_j[std::min(3, static_cast<int>((d.jaccard - 0.8) / 0.05))];
      ++b.planted;
      b.found += found;
    }
  }

  // Precision per reason: a drop is right when it and its keeper are one family.
  std::map<reason, tally> prec;  // planted = drops judged, found = right ones
  std::size_t gray_drops = 0;
  for (auto i : dropped) {
    const std::size_t k = keeper[i];
    if ((docs[i].k == kind::gray || docs[k].k == kind::gray) && family(i) == family(k)) {
      ++gray_drops;
      continue;
    }
    auto& t = prec[why[i]];
    ++t.planted;
    t.found += family(i) == family(k);
  }

  const auto& st = v->stats();
  std::printf("dedup planted corpus: %zu documents (%zu bases from %zu Debian texts)\n", docs.size(),
              static_cast<std::size_t>(std::count_if(docs.begin(), docs.end(), [](auto& d) { return d.k == kind::base; })),
              texts.size());
  for (auto& [k, t] : rec)
    std::printf("  recall %-5s %4zu/%-4zu = %.4f\n", testing::kind_name(k), t.found, t.planted, t.recall());
  for (auto& [b, t] : near_by_j)
    std::printf("  recall near J in [%.2f,%.2f) %4zu/%-4zu = %.4f\n", 0.8 + 0.05 * b, b == 3 ? 1.0 : 0.85 + 0.05 * b,
                t.found, t.planted, t.recall());
  for (auto& [r, t] : prec)
    std::printf("  precision %-5s drops %4zu/%-4zu = %.4f\n", std::string(to_string(r)).c_str(), t.found, t.planted,
                t.recall());
  std::printf("  gray drops (not judged) %zu; candidates %llu, confirmed %llu, clusters %llu\n", gray_drops,
              static_cast<unsigned long long>(st.candidate_pairs), static_cast<unsigned long long>(st.confirmed_pairs),
              static_cast<unsigned long long>(st.clusters));

  CHECK(rec[kind::exact].planted >= 250);
  CHECK(rec[kind::near].planted >= 400);
  CHECK(rec[kind::far].planted >= 100);
  CHECK(rec[kind::exact].recall() >= 0.95);
  CHECK(rec[kind::near].recall() >= 0.95);
  const std::size_t judged = prec[reason::exact].planted + prec[reason::near].planted;
  const std::size_t right = prec[reason::exact].found + prec[reason::near].found;
  CHECK(static_cast<double>(right) / judged >= 0.99);
  CHECK(prec[reason::exact].recall() >= 0.99);
  CHECK(prec[reason::near].recall() >= 0.99);
  // Far copies (J < 0.55) are not duplicates: nearly all stay apart.
  CHECK(rec[kind::far].recall() <= 0.01);
  // Every exact copy that lost to a smaller id says so.
  for (std::size_t i = 0; i < docs.size(); ++i)
    if (docs[i].k == kind::exact && id_of(i) > id_of(static_cast<std::size_t>(docs[i].base)))
      CHECK(why[i] == reason::exact);
}
