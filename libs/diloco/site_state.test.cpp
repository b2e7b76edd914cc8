// site_state: the pseudo-gradient a site sends, each merge rule on receipt of
// a global fragment (with and without overlapped inner steps), updates vs.
// parameters, and — with the outer optimizer — plain DiLoCo end to end.
#include "libs/diloco/outer_optimizer.hpp"
#include "libs/diloco/site_state.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace loom;
using namespace loom::diloco;

namespace {

fragment_plan plan4x2() { return fragment_plan::flat(4, 2, 10).value(); }  // [0,2) and [2,4)

site_state site(const std::vector<float>& global, site_options o = {}) {
  return site_state::make(plan4x2(), global, {0, 0}, o).value();
}

}  // namespace

TEST_CASE("the pseudo-gradient is the anchor minus the local parameters, for the fragment asked") {
  auto s = site({1, 2, 3, 4});
  std::vector<float> local{0.5f, 2.5f, 3, 4}, d(2);
  REQUIRE(s.pseudo_gradient(0, local, d).ok());
  CHECK(d == std::vector<float>{0.5f, -0.5f});
  CHECK(s.in_flight(0));
  CHECK_FALSE(s.in_flight(1));
  std::vector<float> three(3);
  CHECK(s.pseudo_gradient(1, local, three).code() == errc::invalid_argument);
  CHECK(s.pseudo_gradient(2, local, d).code() == errc::invalid_argument);
}

TEST_CASE("with no inner step since sending, keep_progress leaves exactly the new global values") {
  auto s = site({1, 2, 3, 4});
  std::vector<float> local{0.3f, 2.7f, 3.1f, 4}, d(2);
  REQUIRE(s.pseudo_gradient(0, local, d).ok());
  const std::vector<float> g{0.77f, 2.41f};
  REQUIRE(s.apply_global(0, 1, g, local).ok());
  CHECK(local[0] == 0.77f);
  CHECK(local[1] == 2.41f);
  CHECK(local[2] == 3.1f);  // the other fragment is untouched
  CHECK(s.version(0) == 1);
  CHECK(s.anchor()[0] == 0.77f);
  CHECK_FALSE(s.in_flight(0));
}

TEST_CASE("inner steps taken while the delta travelled are kept on top of the new global values") {
  auto s = site({1, 2, 3, 4});
  std::vector<float> local{0.5f, 2.5f, 3, 4}, d(2);
  REQUIRE(s.pseudo_gradient(0, local, d).ok());
  local[0] -= 0.25f;  // τ overlapped steps move the fragment on
  local[1] += 0.125f;
  REQUIRE(s.apply_global(0, 1, std::vector<float>{0.75f, 2.25f}, local).ok());
  CHECK(local[0] == doctest::Approx(0.5f));   // 0.75 + (0.25 - 0.5)
  CHECK(local[1] == doctest::Approx(2.375f));  // 2.25 + (2.625 - 2.5)
}

TEST_CASE("a global fragment the site sent nothing for keeps all of the site's progress since its anchor") {
  auto s = site({1, 2, 3, 4});
  std::vector<float> local{1, 2, 2.5f, 4.5f};
  REQUIRE(s.apply_global(1, 1, std::vector<float>{3.25f, 3.75f}, local).ok());
  CHECK(local[2] == doctest::Approx(2.75f));  // 2.5 + (3.25 - 3)
  CHECK(local[3] == doctest::Approx(4.25f));  // 4.5 + (3.75 - 4)
}

TEST_CASE("replace takes the global values and mix blends them by alpha") {
  auto r = site({1, 2, 3, 4}, {merge_rule::replace, 0.5f});
  std::vector<float> local{9, 9, 9, 9};
  REQUIRE(r.apply_global(0, 1, std::vector<float>{5, 6}, local).ok());
  CHECK(local == std::vector<float>{5, 6, 9, 9});
  auto m = site({1, 2, 3, 4}, {merge_rule::mix, 0.25f});
  local = {9, 9, 9, 9};
  REQUIRE(m.apply_global(0, 1, std::vector<float>{5, 1}, local).ok());
  CHECK(local[0] == doctest::Approx(0.25 * 9 + 0.75 * 5));
  CHECK(local[1] == doctest::Approx(0.25 * 9 + 0.75 * 1));
  CHECK(m.anchor()[0] == 5.0f);
}

TEST_CASE("an outer update moves the anchor by -U and must be the next version") {
  auto s = site({1, 2, 3, 4}, {merge_rule::replace, 0.5f});
  std::vector<float> local{1, 2, 3, 4};
  REQUIRE(s.apply_update(1, 1, std::vector<float>{0.5f, -0.5f}, local).ok());
  CHECK(local == std::vector<float>{1, 2, 2.5f, 4.5f});
  auto skip = s.apply_update(1, 3, std::vector<float>{0, 0}, local);
  CHECK(skip.code() == errc::conflict);
  CHECK(skip.err().message ==
        "site_state: fragment 1 is at version 1; an update to version 3 needs the parameters, not an update");
  auto old = s.apply_global(1, 1, std::vector<float>{0, 0}, local);
  CHECK(old.code() == errc::conflict);
  CHECK(s.apply_global(1, 5, std::vector<float>{7, 7}, local).ok());  // parameters may jump versions
  CHECK(s.version(1) == 5);
}

TEST_CASE("two sites and plain averaging: after a sync both hold the mean of their parameters") {
  const std::vector<float> start{1, 1, 1, 1};
  auto opt = outer_optimizer::make(plan4x2(), start, outer_options::plain_average()).value();
  auto a = site(start), b = site(start);
  std::vector<float> la{0, 2, 1, 1}, lb{2, 4, 1, 1}, da(2), db(2), u(2);
  REQUIRE(a.pseudo_gradient(0, la, da).ok());
  REQUIRE(b.pseudo_gradient(0, lb, db).ok());
  REQUIRE(opt.accumulate(0, 1, da).ok());
  REQUIRE(opt.accumulate(0, 1, db).ok());
  REQUIRE(opt.step(0, u).ok());
  REQUIRE(a.apply_update(0, 1, u, la).ok());
  REQUIRE(b.apply_update(0, 1, u, lb).ok());
  CHECK(la == std::vector<float>{1, 3, 1, 1});
  CHECK(lb == la);
  CHECK(opt.full_params()[1] == 3.0f);
}
