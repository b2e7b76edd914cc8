// The preference losses: values against their formulas, closed-form
// gradients against finite differences, no overflow at extreme margins, and
// the exact KL of a model to itself and to a shifted copy.
#include "services/trainer/align/losses.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace loom::align;

TEST_CASE("Bradley-Terry gives log 2 at equal rewards and its gradients match finite differences") {
  const std::vector<float> c{1.0f, 0.5f, -2.0f}, r{1.0f, -0.5f, 1.0f};
  std::vector<float> dc(3), dr(3);
  const bt_stats s = bradley_terry(c, r, dc, dr);
  const double want = (std::log(2.0) + std::log1p(std::exp(-1.0)) + std::log1p(std::exp(3.0))) / 3;
  CHECK(s.loss == doctest::Approx(want).epsilon(1e-12));
  CHECK(s.accuracy == doctest::Approx(0.5));  // one win, one tie, one loss
  CHECK(s.margin == doctest::Approx((0.0 + 1.0 - 3.0) / 3));
  for (std::size_t i = 0; i < 3; ++i) {
    std::vector<float> cp = c, cm = c;
    const float h = 1e-3f;
    cp[i] += h;
    cm[i] -= h;
    const double fd = (bradley_terry(cp, r).loss - bradley_terry(cm, r).loss) / (2 * h);
    CHECK(dc[i] == doctest::Approx(fd).epsilon(1e-3));
    CHECK(dr[i] == doctest::Approx(-dc[i]));
  }
}

TEST_CASE("DPO's loss is log 2 when the policy equals the reference, and its gradients match finite differences") {
  const std::vector<float> pc{-10, -20, -5}, pr{-12, -18, -7}, rc{-11, -19, -6}, rr{-11, -19, -6};
  std::vector<float> dc(3), dr(3);
  const dpo_options o{0.5f, preference_loss::dpo};
  const dpo_stats same = dpo_loss(o, rc, rr, rc, rr);
  CHECK(same.loss == doctest::Approx(std::log(2.0)));
  CHECK(same.accuracy == doctest::Approx(0.5));
  const dpo_stats s = dpo_loss(o, pc, pr, rc, rr, dc, dr);
  // h = (pc − rc) − (pr − rr) = {2, -2, 2}
  CHECK(s.reward_margin == doctest::Approx(0.5 * (2 - 2 + 2) / 3.0));
  CHECK(s.accuracy == doctest::Approx(2.0 / 3));
  CHECK(s.policy_accuracy == doctest::Approx(2.0 / 3));  // -10 > -12, -20 < -18, -5 > -7
  CHECK(s.loss == doctest::Approx((2 * std::log1p(std::exp(-1.0)) + std::log1p(std::exp(1.0))) / 3).epsilon(1e-12));
  for (std::size_t i = 0; i < 3; ++i) {
    std::vector<float> a = pc, b = pc;
    const float h = 1e-2f;
    a[i] += h;
    b[i] -= h;
    const double fd = (dpo_loss(o, a, pr, rc, rr).loss - dpo_loss(o, b, pr, rc, rr).loss) / (2 * h);
    CHECK(dc[i] == doctest::Approx(fd).epsilon(1e-4));
    CHECK(dr[i] == doctest::Approx(-dc[i]));
  }
}

TEST_CASE("IPO pulls the log-ratio gap to 1/(2 beta): zero loss and gradient there") {
  const dpo_options o{0.25f, preference_loss::ipo};  // target gap 2
  const std::vector<float> pc{-8}, pr{-10}, ref{-10};
  std::vector<float> dc(1), dr(1);
  const dpo_stats at = dpo_loss(o, pc, pr, std::vector<float>{-10}, ref, dc, dr);
  CHECK(at.loss == doctest::Approx(0.0));
  CHECK(dc[0] == doctest::Approx(0.0));
  const dpo_stats below = dpo_loss(o, std::vector<float>{-9}, pr, std::vector<float>{-10}, ref, dc, dr);
  CHECK(below.loss == doctest::Approx(1.0));  // gap 1: (1 − 2)²
  CHECK(dc[0] == doctest::Approx(-2.0));
  CHECK(dr[0] == doctest::Approx(2.0));
}

TEST_CASE("the losses stay finite at extreme margins") {
  const std::vector<float> big{1e4f}, small{-1e4f};
  std::vector<float> d1(1), d2(1);
  const bt_stats a = bradley_terry(small, big, d1, d2);
  CHECK(a.loss == doctest::Approx(2e4));
  CHECK(d1[0] == doctest::Approx(-1.0));
  const bt_stats b = bradley_terry(big, small, d1, d2);
  CHECK(b.loss == doctest::Approx(0.0));
  CHECK(std::isfinite(d1[0]));
  const dpo_stats c = dpo_loss({1.0f}, small, big, big, small, d1, d2);
  CHECK(std::isfinite(c.loss));
  CHECK(d1[0] == doctest::Approx(-1.0));
}

TEST_CASE("the token KL is zero between equal logits and grows with a shift of one logit") {
  const int V = 5, Vp = 8;
  std::vector<float> p(2 * Vp, 0.0f), q(2 * Vp, 0.0f);
  for (int v = 0; v < V; ++v) p[v] = q[v] = p[Vp + v] = float(v) * 0.3f;
  q[Vp + 0] = 0.0f;
  for (int v = 1; v < V; ++v) q[Vp + v] = float(v) * 0.3f;
  p[V] = q[V] = 100.0f;  // a padding column: ignored
  const std::vector<float> mask{1.0f, 0.0f};
  const kl_sum same = token_kl(p, q, mask, V, Vp);
  CHECK(same.rows == 1);
  CHECK(same.sum == doctest::Approx(0.0).scale(1e-12));
  q[Vp + 2] = 3.0f;
  const kl_sum diff = token_kl(p, q, std::vector<float>{0.0f, 1.0f}, V, Vp);
  CHECK(diff.rows == 1);
  CHECK(diff.sum > 0.01);
}
