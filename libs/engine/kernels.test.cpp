// Every kernel against the float64 reference: forward values, and the
// hand-written backward against central finite differences of s = Σ dy·f(x)
// for a fixed random dy. Bounds are on ‖analytic − numeric‖₂ / ‖numeric‖₂.
#include "libs/engine/kernels.hpp"

#include <doctest/doctest.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstring>
#include <limits>

#include "libs/engine/reference.test.hpp"

namespace k = loom::engine::kernels;
namespace ref = loom::engine::ref;
using ref::numeric_grad;
using ref::rel_error;
using ref::random_floats;
using ref::to_double;

namespace {

// Bound for every op's gradient: float32 analytic vs float64 numeric
// (achieved here: 3e-8 .. 6e-7).
constexpr double op_bound = 1e-5;
// Bound for forward values against the float64 reference.
constexpr double fwd_bound = 1e-5;

double dot(const std::vector<float>& a, const ref::vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < b.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

std::vector<float> minus(std::vector<float> v, float x) {
  for (float& e : v) e -= x;
  return v;
}

}  // namespace

TEST_CASE("dnnl_sgemm gives bitwise-identical results on repeated calls at a fixed thread count") {
  // A GPT-2 MLP shape (B·T = 256 rows), in all three orientations the engine uses.
  const int M = 256, N = 3072, K = 768;
  const auto a = random_floats(std::size_t(M) * K, 11, -1, 1);
  const auto b = random_floats(std::size_t(N) * K, 12, -1, 1);
  const auto d = random_floats(std::size_t(M) * N, 13, -1, 1);
  auto run = [&](char ta, char tb, int m, int n, int kk, const float* A, int lda, const float* B,
                 int ldb) {
    std::vector<float> c(std::size_t(m) * n, 0.5f);
    REQUIRE(dnnl_sgemm(ta, tb, m, n, kk, 1.0f, A, lda, B, ldb, 1.0f, c.data(), n) == dnnl_success);
    return c;
  };
  for (int rep = 0; rep < 3; ++rep) {
    const auto f1 = run('N', 'T', M, N, K, a.data(), K, b.data(), K);
    const auto f2 = run('N', 'T', M, N, K, a.data(), K, b.data(), K);
    CHECK(std::memcmp(f1.data(), f2.data(), f1.size() * 4) == 0);
    const auto g1 = run('N', 'N', M, K, N, d.data(), N, b.data(), K);
    const auto g2 = run('N', 'N', M, K, N, d.data(), N, b.data(), K);
    CHECK(std::memcmp(g1.data(), g2.data(), g1.size() * 4) == 0);
    const auto w1 = run('T', 'N', N, K, M, d.data(), N, a.data(), K);
    const auto w2 = run('T', 'N', N, K, M, d.data(), N, a.data(), K);
    CHECK(std::memcmp(w1.data(), w2.data(), w1.size() * 4) == 0);
  }
}

TEST_CASE("exp_approx is within 3e-7 relative of exp on [-80, 80]") {
  double worst = 0;
  for (int i = -80000; i <= 80000; ++i) {
    const float x = i * 1e-3f;
    const double e = std::exp(double(x));
    worst = std::max(worst, std::abs(k::exp_approx(x) - e) / e);
  }
  MESSAGE("exp_approx worst relative error: " << worst);
  CHECK(worst < 3e-7);
  CHECK(k::exp_approx(-1000.0f) < 1e-37f);
}

TEST_CASE("the embedding kernels match float64 finite differences, repeated tokens included") {
  const int B = 2, T = 3, C = 5, V = 4;
  const std::vector<std::int32_t> tok{1, 3, 1, 0, 1, 3};
  auto wte = random_floats(V * C, 1, -1, 1), wpe = random_floats(T * C, 2, -1, 1);
  const auto dy = random_floats(B * T * C, 3, -1, 1);
  std::vector<float> out(B * T * C);
  k::encoder_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
  ref::vec wted = to_double(wte), wped = to_double(wpe), o;
  ref::encoder(o, tok, wted.data(), wped.data(), B, T, C);
  CHECK(rel_error(out, o) < fwd_bound);
  auto s = [&] { ref::encoder(o, tok, wted.data(), wped.data(), B, T, C); return dot(dy, o); };
  std::vector<float> dwte(V * C, 1.0f), dwpe(T * C, 1.0f);  // backward accumulates
  k::encoder_backward(dwte.data(), dwpe.data(), dy.data(), tok.data(), B, T, C);
  const double e1 = rel_error(minus(dwte, 1.0f), numeric_grad(wted, s));
  const double e2 = rel_error(minus(dwpe, 1.0f), numeric_grad(wped, s));
  MESSAGE("encoder grad rel. errors: wte " << e1 << ", wpe " << e2);
  CHECK(e1 < op_bound);
  CHECK(e2 < op_bound);
}

TEST_CASE("layernorm backward matches float64 finite differences for input, weight and bias") {
  const int N = 5, C = 67;  // C not a multiple of the 64-column block
  auto x = random_floats(N * C, 4, -2, 3), w = random_floats(C, 5, 0.5f, 1.5f),
       b = random_floats(C, 6, -0.5f, 0.5f);
  const auto dy = random_floats(N * C, 7, -1, 1);
  std::vector<float> out(N * C), mean(N), rstd(N);
  k::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  ref::vec xd = to_double(x), wd = to_double(w), bd = to_double(b), o;
  ref::layernorm(o, xd, wd.data(), bd.data(), N, C);
  CHECK(rel_error(out, o) < fwd_bound);
  auto s = [&] { ref::layernorm(o, xd, wd.data(), bd.data(), N, C); return dot(dy, o); };
  std::vector<float> dx(N * C, 0.25f), dw(C, 0.5f), db(C, -0.5f);  // all accumulate
  k::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                        mean.data(), rstd.data(), N, C);
  const double ex = rel_error(minus(dx, 0.25f), numeric_grad(xd, s));
  const double ew = rel_error(minus(dw, 0.5f), numeric_grad(wd, s));
  const double eb = rel_error(minus(db, -0.5f), numeric_grad(bd, s));
  MESSAGE("layernorm grad rel. errors: x " << ex << ", w " << ew << ", b " << eb);
  CHECK(ex < op_bound);
  CHECK(ew < op_bound);
  CHECK(eb < op_bound);
}

TEST_CASE("matmul with bias matches float64 finite differences, overwriting dinp and adding to dweight") {
  const int N = 6, C = 5, OC = 70;
  auto x = random_floats(N * C, 8, -1, 1), w = random_floats(OC * C, 9, -1, 1),
       b = random_floats(OC, 10, -1, 1);
  const auto dy = random_floats(N * OC, 11, -1, 1);
  std::vector<float> out(N * OC);
  k::matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
  ref::vec xd = to_double(x), wd = to_double(w), bd = to_double(b), o;
  ref::matmul(o, xd, wd.data(), bd.data(), N, C, OC);
  CHECK(rel_error(out, o) < fwd_bound);
  auto s = [&] { ref::matmul(o, xd, wd.data(), bd.data(), N, C, OC); return dot(dy, o); };
  std::vector<float> dx(N * C, 7.0f), dw(OC * C, 0.5f), db(OC, 0.5f);
  k::matmul_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC);
  const double ex = rel_error(dx, numeric_grad(xd, s));
  const double ew = rel_error(minus(dw, 0.5f), numeric_grad(wd, s));
  const double eb = rel_error(minus(db, 0.5f), numeric_grad(bd, s));
  MESSAGE("matmul grad rel. errors: x " << ex << ", w " << ew << ", b " << eb);
  CHECK(ex < op_bound);
  CHECK(ew < op_bound);
  CHECK(eb < op_bound);
}

TEST_CASE("causal attention matches float64 finite differences for q, k and v") {
  const int B = 2, T = 5, C = 8, NH = 2;
  auto qkv = random_floats(B * T * 3 * C, 12, -1.5f, 1.5f);
  const auto dy = random_floats(B * T * C, 13, -1, 1);
  std::vector<float> out(B * T * C), att(B * NH * T * T);
  k::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  ref::vec qd = to_double(qkv), o;
  ref::attention(o, qd, B, T, C, NH);
  CHECK(rel_error(out, o) < fwd_bound);
  CHECK(att[1] == 0.0f);  // above the diagonal: masked
  auto s = [&] { ref::attention(o, qd, B, T, C, NH); return dot(dy, o); };
  std::vector<float> dqkv(qkv.size(), 9.0f), scratch(B * NH * T);
  k::attention_backward(dqkv.data(), scratch.data(), dy.data(), qkv.data(), att.data(), B, T, C, NH);
  const double e = rel_error(dqkv, numeric_grad(qd, s));
  MESSAGE("attention grad rel. error: " << e);
  CHECK(e < op_bound);
}

TEST_CASE("GELU (tanh form) matches float64 finite differences on [-6, 6], in place too") {
  const std::size_t n = 97;
  auto x = random_floats(n, 14, -6, 6);
  const auto dy = random_floats(n, 15, -1, 1);
  std::vector<float> out(n);
  k::gelu_forward(out.data(), x.data(), n);
  ref::vec xd = to_double(x), o(n);
  auto f = [&] { for (std::size_t i = 0; i < n; ++i) o[i] = ref::gelu(xd[i]); };
  f();
  CHECK(rel_error(out, o) < fwd_bound);
  auto s = [&] { f(); return dot(dy, o); };
  std::vector<float> dx = dy;  // in place: dinp aliases dout
  k::gelu_backward(dx.data(), x.data(), dx.data(), n);
  const double e = rel_error(dx, numeric_grad(xd, s));
  MESSAGE("gelu grad rel. error: " << e);
  CHECK(e < op_bound);
}

TEST_CASE("the residual add passes its gradient to both inputs") {
  const std::size_t n = 33;
  auto a = random_floats(n, 16, -1, 1), b = random_floats(n, 17, -1, 1);
  const auto dy = random_floats(n, 18, -1, 1);
  std::vector<float> out(n), da(n, 1.0f), db(n, 2.0f);
  k::residual_forward(out.data(), a.data(), b.data(), n);
  ref::vec ad = to_double(a), bd = to_double(b), o(n);
  auto s = [&] { for (std::size_t i = 0; i < n; ++i) o[i] = ad[i] + bd[i]; return dot(dy, o); };
  s();
  CHECK(rel_error(out, o) < fwd_bound);
  k::residual_backward(da.data(), db.data(), dy.data(), n);
  CHECK(rel_error(minus(da, 1.0f), numeric_grad(ad, s)) < op_bound);
  CHECK(rel_error(minus(db, 2.0f), numeric_grad(bd, s)) < op_bound);
}

TEST_CASE("weighted softmax cross-entropy matches float64 finite differences and masked rows get no gradient") {
  const int N = 6, V = 70, Vp = 72;
  auto z = random_floats(N * Vp, 19, -3, 3);
  const std::vector<std::int32_t> tgt{0, 5, 69, 5, 33, 1};
  const std::vector<float> w{1.0f, 0.0f, 2.0f, 0.5f, 0.0f, 1.0f};
  std::vector<float> losses(N), lse(N);
  k::crossentropy_forward(losses.data(), lse.data(), z.data(), tgt.data(), N, V, Vp);
  double wsum = 0, loss = 0;
  for (int i = 0; i < N; ++i) wsum += w[i], loss += w[i] * losses[i];
  ref::vec zd = to_double(z);
  const double ref_loss = ref::weighted_xent(zd, tgt, w, N, V, Vp);
  CHECK(std::abs(loss / wsum - ref_loss) < fwd_bound * std::abs(ref_loss));
  std::vector<float> scale(N);
  for (int i = 0; i < N; ++i) scale[i] = float(w[i] / wsum);
  std::vector<float> dz(N * Vp, 5.0f);
  k::crossentropy_backward(dz.data(), z.data(), lse.data(), tgt.data(), scale.data(), N, V, Vp);
  auto s = [&] { return ref::weighted_xent(zd, tgt, w, N, V, Vp); };
  const double e = rel_error(dz, numeric_grad(zd, s));
  MESSAGE("cross-entropy grad rel. error: " << e);
  CHECK(e < op_bound);
  for (int v = 0; v < Vp; ++v) CHECK(dz[1 * Vp + v] == 0.0f);  // weight 0: masked
  CHECK(dz[0 * Vp + V] == 0.0f);                                // padding column
  std::vector<float> inplace = z;  // dlogits written over the logits
  k::crossentropy_backward(inplace.data(), inplace.data(), lse.data(), tgt.data(), scale.data(), N, V, Vp);
  CHECK(std::memcmp(inplace.data(), dz.data(), dz.size() * 4) == 0);
}

TEST_CASE("backward with accumulate = false overwrites stale parameter gradients, NaN included") {
  const int N = 6, C = 70, OC = 9, T = 3;
  const auto x = random_floats(N * C, 20, -1, 1), w = random_floats(OC * C, 21, -1, 1);
  const auto dy = random_floats(N * OC, 22, -1, 1), dyc = random_floats(N * C, 23, -1, 1);
  const std::vector<std::int32_t> tok{0, 2, 1, 2, 2, 0};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
  };
  std::vector<float> dx(N * C);
  std::vector<float> dw0(OC * C, 0.0f), db0(OC, 0.0f), dw1(OC * C, nan), db1(OC, nan);
  k::matmul_backward(dx.data(), dw0.data(), db0.data(), dy.data(), x.data(), w.data(), N, C, OC, true);
  k::matmul_backward(dx.data(), dw1.data(), db1.data(), dy.data(), x.data(), w.data(), N, C, OC, false);
  CHECK(same(dw0, dw1));
  CHECK(same(db0, db1));
  std::vector<float> out(N * C), mean(N), rstd(N), g(C, 1.0f), b(C, 0.0f);
  k::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), N, C);
  std::vector<float> lw0(C, 0.0f), lb0(C, 0.0f), lw1(C, nan), lb1(C, nan);
  k::layernorm_backward(dx.data(), lw0.data(), lb0.data(), dyc.data(), x.data(), g.data(), mean.data(), rstd.data(), N, C, true);
  k::layernorm_backward(dx.data(), lw1.data(), lb1.data(), dyc.data(), x.data(), g.data(), mean.data(), rstd.data(), N, C, false);
  CHECK(same(lw0, lw1));
  CHECK(same(lb0, lb1));
  std::vector<float> e0(3 * C, 0.0f), p0(T * C, 0.0f), e1(3 * C, 0.0f), p1(T * C, nan);
  k::encoder_backward(e0.data(), p0.data(), dyc.data(), tok.data(), 2, T, C, true);
  k::encoder_backward(e1.data(), p1.data(), dyc.data(), tok.data(), 2, T, C, false);
  CHECK(same(e0, e1));
  CHECK(same(p0, p1));
}
