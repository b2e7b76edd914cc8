// transfer_rate: the EWMA of a site's delta transfer rates.
#include "services/trainer/diloco/transfer_rate.hpp"

#include <doctest/doctest.h>

using loom::trainer::transfer_rate;

TEST_CASE("a transfer rate is unmeasured until a transfer with bytes and time is seen") {
  transfer_rate r;
  CHECK(r.bytes_per_s() == 0);
  r.add(0, 1.0);
  r.add(1000, 0.0);
  r.add(1000, -1.0);
  CHECK(r.samples() == 0);
  CHECK(r.bytes_per_s() == 0);
}

TEST_CASE("the first transfer is the estimate and later ones move it by a quarter of the difference") {
  transfer_rate r;
  r.add(2'000'000, 0.5);  // 4 MB/s
  CHECK(r.bytes_per_s() == doctest::Approx(4e6));
  r.add(1'000'000, 1.0);  // 1 MB/s: 4 + (1 - 4) / 4 = 3.25
  CHECK(r.bytes_per_s() == doctest::Approx(3.25e6));
  r.add(3'000'000, 0.5);  // 6 MB/s: 3.25 + (6 - 3.25) / 4 = 3.9375
  CHECK(r.bytes_per_s() == doctest::Approx(3.9375e6));
  CHECK(r.samples() == 3);
}
