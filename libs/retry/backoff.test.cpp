#include "libs/retry/backoff.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

using loom::retry::backoff;
using ms = std::chrono::milliseconds;

TEST_CASE("backoff doubles from the initial delay and stays at the cap") {
  backoff b{ms{50}, ms{1000}};
  std::vector<long> got;
  for (int i = 0; i < 8; ++i) got.push_back(static_cast<long>(b.next().count()));
  CHECK(got == std::vector<long>{50, 100, 200, 400, 800, 1000, 1000, 1000});
  CHECK(b.attempts() == 8);
}

TEST_CASE("backoff starts over from the initial delay after reset") {
  backoff b{ms{50}, ms{1000}, 3.0};
  CHECK(b.next() == ms{50});
  CHECK(b.next() == ms{150});
  b.reset();
  CHECK(b.attempts() == 0);
  CHECK(b.next() == ms{50});
}

TEST_CASE("backoff survives thousands of attempts without overflowing the cap") {
  backoff b{ms{1}, ms{5000}};
  ms last{};
  for (int i = 0; i < 5000; ++i) last = b.next();
  CHECK(last == ms{5000});
}

TEST_CASE("jittered backoff is reproducible for a seed and stays within its bounds") {
  backoff a{ms{100}, ms{2000}, 2.0, 0.25, 42};
  backoff same{ms{100}, ms{2000}, 2.0, 0.25, 42};
  backoff other{ms{100}, ms{2000}, 2.0, 0.25, 43};
  bool differs = false;
  bool jittered = false;
  for (int i = 0; i < 12; ++i) {
    const double base = std::min(2000.0, 100.0 * (1 << i));
    const auto d = a.next();
    CHECK(d == same.next());
    if (other.next() != d) differs = true;
    if (d.count() != static_cast<long>(base)) jittered = true;
    CHECK(d.count() >= static_cast<long>(base * 0.75));
    CHECK(d.count() <= static_cast<long>(std::min(2000.0, base * 1.25)));
  }
  CHECK(differs);
  CHECK(jittered);
}

TEST_CASE("out-of-range backoff arguments are normalised") {
  backoff b{ms{100}, ms{10}, 0.5, 7.0};  // max < initial, factor < 1, jitter > 1
  CHECK(b.next() <= ms{100});
  CHECK(b.next() <= ms{100});
}
