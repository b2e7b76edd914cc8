// outer_optimizer: the outer Nesterov step against numbers worked by hand,
// plain averaging, streaming per fragment, the accumulator's determinism, and
// the checks on what comes in.
#include "libs/diloco/outer_optimizer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace loom;
using namespace loom::diloco;

namespace {

fragment_plan flat_plan(std::size_t n, int P = 1) { return fragment_plan::flat(n, P, 10).value(); }

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("two sites, two outer Nesterov steps: the numbers worked by hand") {
  // θ = [1, 2]; site A Δ = [0.1, 0.2] with 1 token, site B Δ = [0.3, -0.2] with 3.
  // g = ([0.1, 0.2]·1 + [0.3, -0.2]·3) / 4 = [0.25, -0.1]
  // step 1: m = g;            U = 0.7·(g + 0.9·m) = 1.33·g = [0.3325, -0.133]; θ = [0.6675, 2.133]
  // step 2: m = 0.9·m + g = 1.9·g = [0.475, -0.19];
  //         U = 0.7·(g + 0.9·m) = 0.7·2.71·g = [0.47425, -0.1897];          θ = [0.19325, 2.3227]
  auto opt = outer_optimizer::make(flat_plan(2), {1.0f, 2.0f}, outer_options{});
  REQUIRE(opt.ok());
  const std::vector<float> a{0.1f, 0.2f}, b{0.3f, -0.2f};
  std::vector<float> u(2);
  REQUIRE(opt->accumulate(0, 1, a).ok());
  REQUIRE(opt->accumulate(0, 3, b).ok());
  CHECK(opt->pending_weight(0) == 4);
  CHECK(opt->pending_deltas(0) == 2);
  auto s1 = opt->step(0, u);
  REQUIRE(s1.ok());
  CHECK(s1->version == 1);
  CHECK(s1->weight == 4);
  CHECK(s1->deltas == 2);
  CHECK(u[0] == doctest::Approx(0.3325).epsilon(1e-6));
  CHECK(u[1] == doctest::Approx(-0.133).epsilon(1e-6));
  CHECK(opt->full_params()[0] == doctest::Approx(0.6675).epsilon(1e-6));
  CHECK(opt->full_params()[1] == doctest::Approx(2.133).epsilon(1e-6));
  CHECK(opt->full_momentum()[0] == doctest::Approx(0.25).epsilon(1e-6));
  CHECK(opt->pending_deltas(0) == 0);

  REQUIRE(opt->accumulate(0, 3, b).ok());  // the other order: same average
  REQUIRE(opt->accumulate(0, 1, a).ok());
  REQUIRE(opt->step(0, u).ok());
  CHECK(u[0] == doctest::Approx(0.47425).epsilon(1e-6));
  CHECK(opt->full_params()[0] == doctest::Approx(0.19325).epsilon(1e-5));
  CHECK(opt->full_params()[1] == doctest::Approx(2.3227).epsilon(1e-6));
  CHECK(opt->version(0) == 2);
}

TEST_CASE("plain averaging makes the global parameters the token-weighted mean of the sites'") {
  // θ = [1, 1]; site A ends at [0.5, 2] (1 token), site B at [1.5, 0] (3 tokens).
  auto opt = outer_optimizer::make(flat_plan(2), {1.0f, 1.0f}, outer_options::plain_average());
  REQUIRE(opt.ok());
  CHECK(opt->full_momentum().empty());  // μ = 0 keeps no momentum buffer
  REQUIRE(opt->accumulate(0, 1, std::vector<float>{0.5f, -1.0f}).ok());
  REQUIRE(opt->accumulate(0, 3, std::vector<float>{-0.5f, 1.0f}).ok());
  REQUIRE(opt->step(0).ok());
  CHECK(opt->full_params()[0] == doctest::Approx((0.5 * 1 + 1.5 * 3) / 4));
  CHECK(opt->full_params()[1] == doctest::Approx((2.0 * 1 + 0.0 * 3) / 4));
}

TEST_CASE("a step on one fragment changes only that fragment's parameters, momentum and version") {
  auto opt = outer_optimizer::make(flat_plan(10, 2), std::vector<float>(10, 1.0f), outer_options{});
  REQUIRE(opt.ok());
  REQUIRE(opt->accumulate(1, 5, std::vector<float>(5, 0.5f)).ok());
  REQUIRE(opt->step(1).ok());
  for (int i = 0; i < 5; ++i) CHECK(opt->full_params()[i] == 1.0f);
  for (int i = 5; i < 10; ++i) CHECK(opt->full_params()[i] < 1.0f);
  for (int i = 0; i < 5; ++i) CHECK(opt->full_momentum()[i] == 0.0f);
  CHECK(opt->version(0) == 0);
  CHECK(opt->version(1) == 1);
}

TEST_CASE("the update handed out is what the step subtracted from the global parameters") {
  auto opt = outer_optimizer::make(flat_plan(64, 2), std::vector<float>(64, 0.25f), outer_options{});
  REQUIRE(opt.ok());
  std::vector<float> d(32);
  for (int i = 0; i < 32; ++i) d[i] = 0.01f * static_cast<float>(i - 16);
  std::vector<float> before = opt->full_params(), u(32);
  REQUIRE(opt->accumulate(0, 2, d).ok());
  REQUIRE(opt->step(0, u).ok());
  for (int i = 0; i < 32; ++i) CHECK(opt->full_params()[i] == before[i] - u[i]);
}

TEST_CASE("summed in fp64, four sites' deltas give the same bits in every arrival order") {
  constexpr std::size_t n = 20000;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<std::vector<float>> deltas(4, std::vector<float>(n));
  for (auto& d : deltas)
    for (auto& v : d) v = normal(rng);
  const double weights[4] = {1000, 3000, 1500, 2500};
  std::vector<int> order{0, 1, 2, 3};
  std::vector<float> first;
  int orders = 0;
  do {
    auto opt = outer_optimizer::make(flat_plan(n), std::vector<float>(n, 0.5f), outer_options{}).value();
    for (int s : order) REQUIRE(opt.accumulate(0, weights[s], deltas[s]).ok());
    REQUIRE(opt.step(0).ok());
    if (first.empty()) first = opt.full_params();
    CHECK(same_bits(first, opt.full_params()));
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(orders == 24);
}

TEST_CASE("summed in fp32, the same arrival order gives the same bits") {
  constexpr std::size_t n = 5000;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> a(n), b(n);
  for (auto& v : a) v = normal(rng);
  for (auto& v : b) v = normal(rng);
  outer_options o;
  o.precision = accumulate_in::fp32;
  std::vector<float> runs[2];
  for (auto& r : runs) {
    auto opt = outer_optimizer::make(flat_plan(n), std::vector<float>(n, 0.5f), o).value();
    REQUIRE(opt.accumulate(0, 7, a).ok());
    REQUIRE(opt.accumulate(0, 3, b).ok());
    REQUIRE(opt.step(0).ok());
    r = opt.full_params();
  }
  CHECK(same_bits(runs[0], runs[1]));
}

TEST_CASE("a job restored from its saved state continues bit for bit") {
  const std::vector<float> d1{0.1f, -0.2f, 0.3f, 0.05f}, d2{0.02f, 0.04f, -0.06f, 0.3f};
  auto run = outer_optimizer::make(flat_plan(4), {1, 2, 3, 4}, outer_options{}).value();
  REQUIRE(run.accumulate(0, 1, d1).ok());
  REQUIRE(run.step(0).ok());
  auto resumed = outer_optimizer::restore(run.plan(), run.full_params(), run.full_momentum(), run.versions(),
                                          run.options());
  REQUIRE(resumed.ok());
  for (auto* o : {&run, &resumed.value()}) {
    REQUIRE(o->accumulate(0, 2, d2).ok());
    REQUIRE(o->step(0).ok());
  }
  CHECK(same_bits(run.full_params(), resumed->full_params()));
  CHECK(resumed->version(0) == 2);
}

TEST_CASE("a delta of the wrong size, fragment or weight is refused and nothing is added") {
  auto opt = outer_optimizer::make(flat_plan(4, 2), std::vector<float>(4, 0.0f), outer_options{}).value();
  auto size = opt.accumulate(0, 1, std::vector<float>(3, 0.0f));
  CHECK(size.code() == errc::invalid_argument);
  CHECK(size.err().message == "outer_optimizer: delta for fragment 0 has 3 values; the fragment has 2");
  CHECK(opt.accumulate(2, 1, std::vector<float>(2, 0.0f)).code() == errc::invalid_argument);
  CHECK(opt.accumulate(0, 0, std::vector<float>(2, 0.0f)).code() == errc::invalid_argument);
  CHECK(opt.accumulate(0, std::nan(""), std::vector<float>(2, 0.0f)).code() == errc::invalid_argument);
  CHECK(opt.pending_deltas(0) == 0);
  auto empty = opt.step(0);
  CHECK(empty.code() == errc::conflict);
  CHECK(empty.err().message == "outer_optimizer: no delta accumulated for fragment 0");
  CHECK(outer_optimizer::make(flat_plan(4), std::vector<float>(3), outer_options{}).code() == errc::invalid_argument);
  outer_options bad;
  bad.momentum = 1.0f;
  CHECK(outer_optimizer::make(flat_plan(4), std::vector<float>(4), bad).code() == errc::invalid_argument);
}

TEST_CASE("first_non_finite names the first NaN or infinity, past a whole clean block") {
  std::vector<float> v(10000, 1.0f);
  v[5000] = 3e38f;  // large but finite
  CHECK_FALSE(first_non_finite(v).has_value());
  v[9001] = std::numeric_limits<float>::infinity();
  v[9500] = std::nanf("");
  CHECK(first_non_finite(v) == 9001u);
  v[17] = -std::numeric_limits<float>::infinity();
  CHECK(first_non_finite(v) == 17u);
  CHECK_FALSE(first_non_finite({}).has_value());
}

TEST_CASE("correct adds back what the downlink did not carry, in fragment order, and refuses bad input") {
  auto plan = loom::diloco::fragment_plan::flat(6, 2, 2);
  REQUIRE(plan.ok());
  auto opt = loom::diloco::outer_optimizer::make(*plan, {1, 2, 3, 4, 5, 6}, loom::diloco::outer_options::plain_average());
  REQUIRE(opt.ok());
  const std::vector<float> add{0.5f, -1.0f, 0.25f};
  REQUIRE(opt->correct(1, add).ok());
  CHECK(opt->full_params() == std::vector<float>{1, 2, 3, 4.5f, 4, 6.25f});
  CHECK(opt->correct(2, add).code() == loom::errc::invalid_argument);
  CHECK(opt->correct(0, std::vector<float>{1, 2}).code() == loom::errc::invalid_argument);
  CHECK(opt->correct(0, std::vector<float>{1, std::nanf(""), 2}).code() == loom::errc::invalid_argument);
  CHECK(opt->version(1) == 0);  // not an outer step
}

TEST_CASE("a fragment out of memory takes deltas, refuses its step until loaded back, and then steps as if it never left") {
  const std::vector<float> d{0.1f, -0.2f, 0.3f, 0.05f};
  auto kept = outer_optimizer::make(flat_plan(4), {1, 2, 3, 4}, outer_options{}).value();
  auto left = outer_optimizer::make(flat_plan(4), {1, 2, 3, 4}, outer_options{}).value();
  const std::vector<float> theta(left.params(0).begin(), left.params(0).end());
  const std::vector<float> m(left.momentum(0).begin(), left.momentum(0).end());
  left.unload(0);
  CHECK_FALSE(left.loaded(0));
  CHECK(left.loaded_count() == 0);
  CHECK(left.params(0).empty());
  for (auto* o : {&kept, &left}) REQUIRE(o->accumulate(0, 1, d).ok());
  auto refused = left.step(0);
  CHECK(refused.code() == errc::conflict);
  CHECK(refused.err().message.find("not loaded") != std::string::npos);
  CHECK(left.correct(0, d).code() == errc::conflict);
  CHECK(left.load(0, {1, 2, 3}, m).code() == errc::invalid_argument);  // sizes named, nothing changed
  CHECK_FALSE(left.loaded(0));
  REQUIRE(left.load(0, theta, m).ok());
  for (auto* o : {&kept, &left}) REQUIRE(o->step(0).ok());
  CHECK(same_bits(kept.full_params(), left.full_params()));
  CHECK(same_bits(kept.full_momentum(), left.full_momentum()));
  CHECK(left.pending_deltas(0) == 0);
  CHECK(left.step(0).code() == errc::conflict);  // the sum went with the step
}
