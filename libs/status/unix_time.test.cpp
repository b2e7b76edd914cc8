#include "libs/status/unix_time.hpp"

#include <doctest/doctest.h>

TEST_CASE("a unix time prints as ISO 8601 in UTC, with the separator asked for") {
  CHECK(loom::utc_text(0) == "1970-01-01T00:00:00Z");
  CHECK(loom::utc_text(1714564800) == "2024-05-01T12:00:00Z");
  CHECK(loom::utc_text(1714564800, ' ') == "2024-05-01 12:00:00Z");
  CHECK(loom::utc_text(-1) == "1969-12-31T23:59:59Z");
}

TEST_CASE("a time gmtime cannot place prints as nothing rather than as garbage") {
  CHECK(loom::utc_text(INT64_MAX).empty());
}

TEST_CASE("unix_ns counts nanoseconds from the epoch and now lies between two readings") {
  using namespace std::chrono;
  CHECK(loom::unix_ns(system_clock::time_point{}) == 0);
  CHECK(loom::unix_ns(system_clock::time_point{seconds(3)} + nanoseconds(7)) == 3'000'000'007);
  const auto before = duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  const std::int64_t now = loom::unix_now_ns();
  const std::int64_t now_s = loom::unix_now_s();
  const auto after = duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  CHECK(now >= before);
  CHECK(now <= after);
  CHECK(now_s >= before / 1'000'000'000);
  CHECK(now_s <= after / 1'000'000'000);
}
