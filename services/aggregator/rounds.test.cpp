// rounds: the aggregator's round state machine with an injected clock —
// quorum and deadline closing, the adaptive deadline, late deltas, every kind
// of bad input, membership, and the outer step's numbers through a round.
#include "services/aggregator/rounds.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace loom;
using namespace loom::aggregator;

namespace {

nanos sec(double s) { return nanos(static_cast<std::int64_t>(std::llround(s * 1e9))); }

round_options opts() {
  round_options o;
  o.deadline_initial = sec(60);
  o.deadline_min = sec(1);
  o.deadline_max = sec(120);
  return o;
}

// A job over 4 values in 2 fragments ([0,2) and [2,4)), θ = 0, plain
// averaging (θ -= mean Δ) unless told otherwise; sites s1..sN enrolled and joined.
job_rounds job(int sites, round_options o = opts(), diloco::outer_options outer = diloco::outer_options::plain_average(),
               std::vector<float> theta = {0, 0, 0, 0}) {
  auto plan = diloco::fragment_plan::flat(theta.size(), 2, 10).value();
  auto opt = diloco::outer_optimizer::make(plan, std::move(theta), outer).value();
  auto j = job_rounds::make(std::move(opt), o, sec(0)).value();
  for (int i = 1; i <= sites; ++i) {
    const std::string id = "s" + std::to_string(i);
    REQUIRE(j.enrol(id, "key-" + id).ok());
    REQUIRE(j.join(id).ok());
  }
  return j;
}

delta_meta meta(const std::string& site, std::uint64_t round, std::uint32_t fragment = 0, std::uint64_t tokens = 100) {
  return {site, round, fragment, round, 2, tokens};
}

const std::vector<float> ones{1, 1};

}  // namespace

TEST_CASE("a round closes by quorum as soon as every active site has sent, before its deadline") {
  auto j = job(3);
  CHECK(j.deadline(0) == sec(60));
  CHECK(j.quorum() == 3);
  REQUIRE(j.submit(meta("s1", 0), ones, sec(10)).ok());
  auto second = j.submit(meta("s2", 0), std::vector<float>{2, 2}, sec(11));
  REQUIRE(second.ok());
  CHECK_FALSE(second->closable);
  auto third = j.submit(meta("s3", 0), std::vector<float>{3, 3}, sec(12));
  REQUIRE(third.ok());
  CHECK(third->closable);
  CHECK(j.closable(sec(12)) == std::vector<std::uint32_t>{0});
  auto c = j.close(0, sec(12));
  REQUIRE(c.ok());
  CHECK(c->by_quorum);
  CHECK(c->round == 0);
  CHECK(c->version == 1);
  CHECK(c->on_time == 3);
  CHECK(c->weight == 300);
  CHECK(j.optimizer().full_params()[0] == doctest::Approx(-2.0));  // θ -= mean(1, 2, 3)
  CHECK(j.optimizer().full_params()[2] == 0.0f);                   // fragment 1 untouched
  CHECK(j.open_round(0) == 1);
  CHECK(j.opened(0) == sec(12));
  CHECK(j.stats().closed_by_quorum == 1);
  CHECK(j.stats().arrivals == 3);
  CHECK(j.stats().last_quorum_size == 3);
}

TEST_CASE("a slow site does not stop the others: the deadline closes the round without it") {
  auto j = job(3);
  REQUIRE(j.submit(meta("s1", 0), ones, sec(10)).ok());
  REQUIRE(j.submit(meta("s2", 0), ones, sec(10.5)).ok());
  CHECK(j.closable(sec(59.9)).empty());
  CHECK(j.next_deadline() == sec(60));
  CHECK(j.closable(sec(60)) == std::vector<std::uint32_t>{0});
  auto c = j.close(0, sec(60));
  REQUIRE(c.ok());
  CHECK_FALSE(c->by_quorum);
  CHECK(c->on_time == 2);
  CHECK(j.stats().closed_by_deadline == 1);
  // A round with nothing in it stays open past its deadline: there is nothing to average.
  CHECK(j.closable(sec(500)).empty());
  CHECK_FALSE(j.next_deadline().has_value());
  CHECK(j.close(1, sec(500)).code() == errc::conflict);
}

TEST_CASE("the deadline follows the observed arrivals: median plus a margin, clamped") {
  auto j = job(3);
  CHECK(j.deadline(0) - j.opened(0) == sec(60));  // nothing observed yet: the initial deadline
  // Round 0: arrivals 10, 10, 11 s after opening. median 10, MAD 0, so the
  // margin is the slack: 0.25 * 10 s -> 12.5 s.
  REQUIRE(j.submit(meta("s1", 0), ones, sec(10)).ok());
  REQUIRE(j.submit(meta("s2", 0), ones, sec(10)).ok());
  REQUIRE(j.submit(meta("s3", 0), ones, sec(11)).ok());
  REQUIRE(j.close(0, sec(11)).ok());
  CHECK(j.deadline(0) - j.opened(0) == sec(12.5));
  // Round 1: the sites slow down to 30 s. Window {10, 10, 11, 30, 30, 30}:
  // median 20.5, MAD 9.5 -> 20.5 + 3 * 1.4826 * 9.5 = 62.7541 s.
  for (const char* s : {"s1", "s2", "s3"}) REQUIRE(j.submit(meta(s, 1), ones, sec(11 + 30)).ok());
  REQUIRE(j.close(0, sec(41)).ok());
  const double planned = std::chrono::duration<double>(j.deadline(0) - j.opened(0)).count();
  CHECK(planned == doctest::Approx(62.7541).epsilon(1e-5));
  // Very fast arrivals are clamped up to deadline_min.
  auto fast = job(2);
  for (const char* s : {"s1", "s2"}) REQUIRE(fast.submit(meta(s, 0), ones, sec(0.1)).ok());
  REQUIRE(fast.close(0, sec(0.1)).ok());
  CHECK(fast.deadline(0) - fast.opened(0) == sec(1));
}

TEST_CASE("a late delta is folded into the open round with a discounted weight, or dropped past the bound") {
  auto o = opts();
  o.staleness_bound = 1;
  auto j = job(4, o);
  REQUIRE(j.submit(meta("s1", 0), ones, sec(10)).ok());
  REQUIRE(j.submit(meta("s2", 0), ones, sec(10)).ok());
  REQUIRE(j.close(0, sec(60)).ok());  // deadline; s3 and s4 missed round 0; θ[0] = -1
  auto late = j.submit(meta("s3", 0), std::vector<float>{4, 4}, sec(70));
  REQUIRE(late.ok());
  CHECK(late->late);
  CHECK(late->round == 1);
  CHECK(late->staleness == 1);
  CHECK(late->weight == 50);  // 100 tokens / (1 + 1)
  REQUIRE(j.submit(meta("s1", 1), ones, sec(75)).ok());
  REQUIRE(j.submit(meta("s2", 1), ones, sec(75)).ok());
  auto c = j.close(0, sec(120));
  REQUIRE(c.ok());
  CHECK(c->on_time == 2);
  CHECK(c->late_folded == 1);
  // mean Δ = (100·1 + 100·1 + 50·4) / 250 = 1.6 -> θ[0] = -1 - 1.6
  CHECK(j.optimizer().full_params()[0] == doctest::Approx(-2.6));
  CHECK(j.stats().late_folded == 1);
  // Round 2 is open: s4's delta for round 0 is 2 versions behind (bound 1).
  auto dropped = j.submit(meta("s4", 0), ones, sec(130));
  REQUIRE_FALSE(dropped.ok());
  CHECK(dropped.code() == errc::deadline_exceeded);
  CHECK(dropped.err().message ==
        "delta from site 's4' for round 0 of fragment 0 was computed from version 0, 2 behind the open round 2 "
        "(bound 1): dropped; pull the current global parameters");
  CHECK(j.stats().late_dropped() == 1);
  CHECK(j.optimizer().pending_deltas(0) == 0);
}

TEST_CASE("each kind of bad delta is refused with its reason and counted, and the round closes with the others") {
  auto j = job(3);
  REQUIRE(j.enrol("s4", "key-s4").ok());  // enrolled, never joined
  REQUIRE(j.enrol("s5", "key-s5").ok());
  REQUIRE(j.join("s5").ok());
  REQUIRE(j.revoke("s5").ok());
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct bad_case {
    delta_meta m;
    std::vector<float> v;
    errc code;
    reject_reason why;
  };
  auto with = [](delta_meta m, auto change) { change(m); return m; };
  const std::vector<bad_case> cases{
      {meta("nobody", 0), ones, errc::not_found, reject_reason::unknown_site},
      {meta("s5", 0), ones, errc::permission_denied, reject_reason::revoked_site},
      {meta("s4", 0), ones, errc::conflict, reject_reason::not_joined},
      {meta("s1", 0, 9), ones, errc::invalid_argument, reject_reason::wrong_fragment},
      {with(meta("s1", 0), [](delta_meta& m) { m.elements = 3; }), {1, 1, 1}, errc::invalid_argument,
       reject_reason::wrong_shape},
      {meta("s1", 0), {1, 1, 1}, errc::invalid_argument, reject_reason::wrong_shape},  // header says 2
      {meta("s1", 0, 0, 0), ones, errc::invalid_argument, reject_reason::no_tokens},
      {meta("s1", 0), {1, nan}, errc::invalid_argument, reject_reason::non_finite},
      {meta("s1", 0), {-inf, 1}, errc::invalid_argument, reject_reason::non_finite},
      {meta("s1", 3), ones, errc::invalid_argument, reject_reason::future_round},
      {with(meta("s1", 0), [](delta_meta& m) { m.base_version = 1; }), ones, errc::invalid_argument,
       reject_reason::future_round},
  };
  for (const auto& c : cases) {
    CAPTURE(to_string(c.why));
    auto r = j.submit(c.m, c.v, sec(5));
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == c.code);
  }
  REQUIRE(j.submit(meta("s1", 0), ones, sec(6)).ok());
  auto dup = j.submit(meta("s1", 0), ones, sec(7));
  CHECK(dup.code() == errc::already_exists);
  CHECK(dup.err().message ==
        "delta from site 's1' for round 0 of fragment 0: the site already sent round 0 of this fragment");
  CHECK(j.submit(meta("s1", 0, 9), ones, sec(7)).err().message ==
        "delta from site 's1' names fragment 9; the job has 2 (0-1)");
  CHECK(j.submit(meta("s2", 0), std::vector<float>{1, nan}, sec(7)).err().message ==
        "delta from site 's2' for round 0 of fragment 0 has NaN at index 1");
  CHECK(j.submit(meta("s1", 0), std::vector<float>{1, 1, 1}, sec(7)).err().message ==
        "delta from site 's1' for round 0 of fragment 0 carries 3 values; its header declares 2");
  // A header of another count: its payload is never decoded (no values), and
  // the refusal says what the header claimed, not "has 0 values".
  auto other = meta("s1", 0);
  other.elements = 999;
  CHECK(j.submit(other, {}, sec(7)).err().message ==
        "delta from site 's1' for round 0 of fragment 0 declares 999 values; the fragment has 2");

  const auto& st = j.stats();
  auto n = [&](reject_reason r) { return st.rejected[static_cast<int>(r)]; };
  CHECK(n(reject_reason::unknown_site) == 1);
  CHECK(n(reject_reason::revoked_site) == 1);
  CHECK(n(reject_reason::not_joined) == 1);
  CHECK(n(reject_reason::wrong_fragment) == 2);
  CHECK(n(reject_reason::wrong_shape) == 4);
  CHECK(n(reject_reason::no_tokens) == 1);
  CHECK(n(reject_reason::non_finite) == 3);
  CHECK(n(reject_reason::future_round) == 2);
  CHECK(n(reject_reason::duplicate) == 1);
  CHECK(st.rejected_total() == 16);
  // Nothing bad reached the accumulator; the two good sites close the round.
  CHECK(j.optimizer().pending_deltas(0) == 1);
  REQUIRE(j.submit(meta("s2", 0), ones, sec(8)).ok());
  auto last = j.submit(meta("s3", 0), ones, sec(9));
  REQUIRE(last.ok());
  CHECK(last->closable);
  auto c = j.close(0, sec(9));
  REQUIRE(c.ok());
  CHECK(c->on_time == 3);
  CHECK(j.optimizer().full_params()[0] == doctest::Approx(-1.0));
  CHECK(std::isfinite(j.optimizer().full_params()[1]));
}

TEST_CASE("a revoked site is refused everywhere and no longer counted in the quorum") {
  auto j = job(3);
  CHECK(j.quorum() == 3);
  REQUIRE(j.revoke("s2").ok());
  CHECK(j.quorum() == 2);
  auto d = j.submit(meta("s2", 0), ones, sec(1));
  CHECK(d.code() == errc::permission_denied);
  CHECK(d.err().message == "delta from site 's2': the site is revoked");
  CHECK(j.join("s2").code() == errc::permission_denied);
  CHECK(j.enrol("s2", "key-s2").code() == errc::permission_denied);
  REQUIRE(j.submit(meta("s1", 0), ones, sec(2)).ok());
  auto r = j.submit(meta("s3", 0), ones, sec(3));
  REQUIRE(r.ok());
  CHECK(r->closable);
  CHECK(j.sites()[1].phase == site_phase::revoked);
}

TEST_CASE("a joining or returning site is told the current versions and its next delta counts") {
  auto j = job(2);
  for (std::uint64_t r = 0; r < 2; ++r) {
    for (const char* s : {"s1", "s2"}) REQUIRE(j.submit(meta(s, r), ones, sec(10.0 * r + 1)).ok());
    REQUIRE(j.close(0, sec(10.0 * r + 2)).ok());
  }
  for (const char* s : {"s1", "s2"}) REQUIRE(j.submit(meta(s, 0, 1), ones, sec(30)).ok());
  REQUIRE(j.close(1, sec(31)).ok());
  REQUIRE(j.enrol("s3", "key-s3").ok());
  CHECK(j.join("nobody").code() == errc::not_found);
  auto v = j.join("s3");
  REQUIRE(v.ok());
  CHECK(*v == std::vector<std::uint64_t>{2, 1});
  CHECK(j.quorum() == 3);
  REQUIRE(j.submit(meta("s3", 2), ones, sec(40)).ok());
  // s1 leaves: its deltas are refused and it no longer counts; it comes back later.
  REQUIRE(j.leave("s1").ok());
  CHECK(j.quorum() == 2);
  CHECK(j.submit(meta("s1", 2), ones, sec(41)).code() == errc::conflict);
  CHECK(j.leave("s1").code() == errc::conflict);
  auto again = j.join("s1");
  REQUIRE(again.ok());
  CHECK((*again)[0] == 2);
  REQUIRE(j.submit(meta("s1", 2), ones, sec(42)).ok());
  CHECK(j.enrol("s3", "another-key").code() == errc::already_exists);
  CHECK(j.enrol("s3", "key-s3").ok());  // the same key again is fine
}

TEST_CASE("quorum as a fraction rounds up and a fixed count is capped at the active sites") {
  auto o = opts();
  o.quorum_fraction = 0.5;
  auto half = job(3, o);
  CHECK(half.quorum() == 2);  // ceil(1.5)
  REQUIRE(half.submit(meta("s1", 0), ones, sec(1)).ok());
  auto r = half.submit(meta("s2", 0), ones, sec(2));
  REQUIRE(r.ok());
  CHECK(r->closable);
  o.quorum_sites = 5;
  CHECK(job(4, o).quorum() == 4);
  o.quorum_sites = 2;
  CHECK(job(4, o).quorum() == 2);
}

TEST_CASE("two sites through a round: the outer Nesterov step gives the numbers worked by hand") {
  // Same example as outer_optimizer.test.cpp: θ = [1, 2], Δ_1 = [0.1, 0.2]
  // (1 token), Δ_2 = [0.3, -0.2] (3 tokens) -> U = [0.3325, -0.133].
  auto plan_theta = std::vector<float>{1, 2, 5, 5};
  auto j = job(2, opts(), diloco::outer_options{}, plan_theta);
  REQUIRE(j.submit(meta("s1", 0, 0, 1), std::vector<float>{0.1f, 0.2f}, sec(1)).ok());
  REQUIRE(j.submit(meta("s2", 0, 0, 3), std::vector<float>{0.3f, -0.2f}, sec(2)).ok());
  std::vector<float> u(2);
  auto c = j.close(0, sec(2), u);
  REQUIRE(c.ok());
  CHECK(u[0] == doctest::Approx(0.3325).epsilon(1e-6));
  CHECK(u[1] == doctest::Approx(-0.133).epsilon(1e-6));
  CHECK(j.optimizer().full_params()[0] == doctest::Approx(0.6675).epsilon(1e-6));
  CHECK(j.optimizer().full_params()[1] == doctest::Approx(2.133).epsilon(1e-6));
  j.record_outer_step(0.004);
  j.record_outer_step(0.002);
  CHECK(j.stats().last_outer_step_s == 0.002);
  CHECK(j.stats().max_outer_step_s == 0.004);
}

TEST_CASE("round options out of range are refused, naming the field") {
  auto plan = diloco::fragment_plan::flat(4, 1, 1).value();
  auto opt = diloco::outer_optimizer::make(plan, std::vector<float>(4), {}).value();
  auto o = opts();
  o.quorum_fraction = 0;
  auto r = job_rounds::make(opt, o, sec(0));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().message == "round_options: quorum_fraction must be in (0, 1]");
  o = opts();
  o.deadline_initial = sec(500);
  CHECK(job_rounds::make(opt, o, sec(0)).code() == errc::invalid_argument);
  o = opts();
  o.deadline_window = 0;
  CHECK(job_rounds::make(opt, o, sec(0)).code() == errc::invalid_argument);
}
