// The labelled PII evaluation of issue 5: precision and recall per type of
// loom::pii on the generated set (labelled.hpp), exact spans. Bounds for the
// structured types: recall >= 0.995, precision >= 0.99; phone and secret
// figures are printed (and held to a looser floor so they cannot rot unseen).
#include "libs/pii/pii.hpp"
#include "tests/pii/labelled.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

using namespace loom::pii;
using namespace loom::pii::test;

namespace {

struct tally {
  std::size_t truth = 0, found = 0, exact = 0, overlap_tp = 0, near_miss = 0, near_miss_flagged = 0;
  std::vector<std::string> missed, spurious;  // examples
  std::map<std::string, std::size_t> missed_by_kind, flagged_by_kind;
};

std::string excerpt(const std::string& text, std::size_t s, std::size_t e) {
  std::string out;
  const std::size_t a = s > 20 ? s - 20 : 0, b = std::min(text.size(), e + 20);
  for (std::size_t i = a; i < b; ++i) {
    if (i == s) out += "[[";
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') out += "\\n";
    else if (c < 0x20 || c >= 0x7f) out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else out += static_cast<char>(c);
    if (i + 1 == e) out += "]]";
  }
  return out;
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool structured(pii_type t) { return t != pii_type::phone && t != pii_type::secret; }

}  // namespace

TEST_CASE("labelled set: recall and precision per type meet the issue's bounds") {
  const auto t0 = std::chrono::steady_clock::now();
  const labelled_set set = make_labelled_set();
  const auto t1 = std::chrono::steady_clock::now();
  auto d = detector::make();
  REQUIRE(d.ok());
  const auto spans = d->find(set.text);
  const auto t2 = std::chrono::steady_clock::now();
  REQUIRE_MESSAGE(set.sources.size() >= 10, "carrier prose missing: /usr/share/common-licenses and copyright files");

  std::map<std::pair<std::size_t, std::size_t>, const planted*> by_span;
  std::vector<std::pair<std::size_t, const planted*>> by_start;  // for overlap look-ups
  for (const auto& p : set.items) {
    by_span[{p.start, p.end}] = &p;
    by_start.emplace_back(p.start, &p);
  }
  // Planted items never overlap: only the last one starting before s.end can overlap s.
  const auto overlapping = [&](const span& s) -> const planted* {
    auto it = std::lower_bound(by_start.begin(), by_start.end(), s.end,
                               [](const auto& a, std::size_t v) { return a.first < v; });
    if (it == by_start.begin()) return nullptr;
    --it;
    return it->second->end > s.start ? it->second : nullptr;
  };

  std::array<tally, type_count> t{};
  for (const auto& p : set.items) (p.near_miss ? t[static_cast<int>(p.type)].near_miss : t[static_cast<int>(p.type)].truth)++;
  std::vector<bool> hit(set.items.size(), false);
  for (const span& s : spans) {
    tally& x = t[static_cast<int>(s.type)];
    ++x.found;
    auto it = by_span.find({s.start, s.end});
    if (it != by_span.end() && !it->second->near_miss && it->second->type == s.type) {
      ++x.exact;
      hit[static_cast<std::size_t>(it->second - set.items.data())] = true;
      continue;
    }
    const planted* p = overlapping(s);
    if (p && !p->near_miss && p->type == s.type) ++x.overlap_tp;
    if (p && p->near_miss) {
      ++t[static_cast<int>(p->type)].near_miss_flagged;
      ++x.flagged_by_kind["near miss " + std::string(to_string(p->type)) + "/" + p->kind];
    } else if (!p) {
      ++x.flagged_by_kind["prose"];
    } else if (p->type != s.type) {
      ++x.flagged_by_kind["planted " + std::string(to_string(p->type)) + "/" + p->kind];
    }
    if (x.spurious.size() < 6)
      x.spurious.push_back(excerpt(set.text, s.start, s.end) + (p ? " (planted " + p->kind + ")" : " (prose)"));
  }
  for (std::size_t i = 0; i < set.items.size(); ++i) {
    const planted& p = set.items[i];
    tally& x = t[static_cast<int>(p.type)];
    if (p.near_miss || hit[i]) continue;
    ++x.missed_by_kind[p.kind];
    if (x.missed.size() < 6) x.missed.push_back(p.kind + ": " + excerpt(set.text, p.start, p.end));
  }

  std::printf("labelled set: %.1f MB, %zu items, %zu carrier files (%zu prose bytes), fnv1a %016llx; "
              "generated in %.2f s, detected in %.2f s\n",
              set.text.size() / 1e6, set.items.size(), set.sources.size(), set.carrier_bytes,
              static_cast<unsigned long long>(fnv1a(set.text)),
              std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count());
  std::printf("%-12s %6s %6s %6s %9s %9s %11s %15s\n", "type", "truth", "found", "exact", "recall", "precision",
              "overlap_p", "near_misses_hit");
  for (pii_type ty : all_types) {
    const tally& x = t[static_cast<int>(ty)];
    const double recall = x.truth ? static_cast<double>(x.exact) / x.truth : 1;
    const double precision = x.found ? static_cast<double>(x.exact) / x.found : 1;
    const double overlap_p = x.found ? static_cast<double>(x.exact + x.overlap_tp) / x.found : 1;
    std::printf("%-12s %6zu %6zu %6zu %9.4f %9.4f %11.4f %8zu/%-6zu\n", std::string(to_string(ty)).c_str(), x.truth,
                x.found, x.exact, recall, precision, overlap_p, x.near_miss_flagged, x.near_miss);
    for (const auto& [kind, count] : x.missed_by_kind) std::printf("    missed   %zu x %s\n", count, kind.c_str());
    for (const auto& [kind, count] : x.flagged_by_kind) std::printf("    spurious %zu x %s\n", count, kind.c_str());
    for (const auto& m : x.missed) std::printf("    missed   %s\n", m.c_str());
    for (const auto& m : x.spurious) std::printf("    spurious %s\n", m.c_str());
    CAPTURE(to_string(ty));
    if (structured(ty)) {
      CHECK(recall >= 0.995);
      CHECK(precision >= 0.99);
    } else {
      CHECK(recall >= 0.95);  // not bounded by the issue: a floor against regressions
      CHECK(precision >= 0.95);
    }
  }
  std::fflush(stdout);
}
