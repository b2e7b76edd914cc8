#include "services/console/job_series.hpp"

#include <doctest/doctest.h>

using loom::console::job_series;
using loom::console::series_point;

TEST_CASE("a job's curve gains a point only when a stage's step moves, and since() resumes where it left off") {
  job_series s;
  CHECK(s.add("j1", {"pretrain", 1, 5.0, 100, 1}));
  CHECK_FALSE(s.add("j1", {"pretrain", 1, 5.0, 100, 2}));
  CHECK(s.add("j1", {"pretrain", 2, 4.5, 110, 3}));
  CHECK(s.add("j1", {"sft", 1, 3.0, 90, 4}));
  CHECK(s.add("j1", {"pretrain", 3, 4.0, 110, 5}));  // another stage's point in between
  std::size_t next = 0;
  auto all = s.since("j1", 0, &next);
  REQUIRE(all.size() == 4);
  CHECK(all[1].loss == doctest::Approx(4.5));
  CHECK(next == 4);
  CHECK(s.add("j1", {"pretrain", 4, 3.9, 110, 6}));
  auto more = s.since("j1", next, &next);
  REQUIRE(more.size() == 1);
  CHECK(more[0].step == 4);
  CHECK(next == 5);
  CHECK(s.since("other", 0, &next).empty());
}

TEST_CASE("a long curve is thinned from its oldest end and indices stay stable") {
  job_series s;
  for (std::uint64_t i = 1; i <= job_series::max_points + 1; ++i) REQUIRE(s.add("j", {"pretrain", i, 1.0, 1, i}));
  std::size_t next = 0;
  auto pts = s.since("j", 0, &next);
  CHECK(next == job_series::max_points + 1);
  CHECK(pts.size() == job_series::max_points + 1 - job_series::max_points / 4);
  CHECK(pts.back().step == job_series::max_points + 1);
  auto tail = s.since("j", next - 2, &next);
  REQUIRE(tail.size() == 2);
  CHECK(tail[0].step == job_series::max_points);
}
