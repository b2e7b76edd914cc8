#include "libs/vision/layers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace k = loom::vision::kernels;

namespace {

std::vector<float> randn(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2 - 1);
  return v;
}

// loss(x) = Σ r · f(x) for a fixed random r; compares the analytic dL/dx
// with central differences at every entry of x.
void check_grad(std::vector<float>& x, const std::vector<float>& analytic, const std::function<double()>& loss,
                double eps = 1e-2, double tol = 2e-2) {
  REQUIRE(analytic.size() == x.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + float(eps);
    const double up = loss();
    x[i] = keep - float(eps);
    const double down = loss();
    x[i] = keep;
    const double num = (up - down) / (2 * eps);
    const double err = std::abs(num - analytic[i]) / std::max(1.0, std::abs(num));
    worst = std::max(worst, err);
  }
  INFO("worst relative error " << worst);
  CHECK(worst < tol);
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

constexpr int B = 2, H = 6, W = 4, C = 3, OC = 5;

}  // namespace

TEST_CASE("conv3x3 forward equals a direct convolution with zero padding") {
  const auto x = randn(B * H * W * C, 1), w = randn(OC * 9 * C, 2), b = randn(OC, 3);
  std::vector<float> out(B * H * W * OC), col(B * H * W * 9 * C);
  k::conv3x3_forward(out.data(), col.data(), x.data(), w.data(), b.data(), B, H, W, C, OC);
  double worst = 0;
  for (int n = 0; n < B; ++n)
    for (int y = 0; y < H; ++y)
      for (int xx = 0; xx < W; ++xx)
        for (int o = 0; o < OC; ++o) {
          double s = b[o];
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx)
              for (int c = 0; c < C; ++c) {
                const int sy = y + ky - 1, sx = xx + kx - 1;
                if (sy < 0 || sy >= H || sx < 0 || sx >= W) continue;
                s += double(w[(o * 9 + ky * 3 + kx) * C + c]) * x[((n * H + sy) * W + sx) * C + c];
              }
          worst = std::max(worst, std::abs(s - out[((n * H + y) * W + xx) * OC + o]));
        }
  CHECK(worst < 1e-4);
}

TEST_CASE("conv3x3 backward matches finite differences for input, weight and bias") {
  auto x = randn(B * H * W * C, 4), w = randn(OC * 9 * C, 5), b = randn(OC, 6);
  const auto r = randn(B * H * W * OC, 7);
  std::vector<float> out(B * H * W * OC), col(B * H * W * 9 * C), dcol(col.size());
  auto loss = [&] {
    k::conv3x3_forward(out.data(), col.data(), x.data(), w.data(), b.data(), B, H, W, C, OC);
    return dot(out, r);
  };
  loss();
  std::vector<float> dx(x.size()), dw(w.size(), 0.0f), db(b.size(), 0.0f);
  k::conv3x3_backward(dx.data(), dw.data(), db.data(), dcol.data(), r.data(), col.data(), w.data(), B, H, W, C, OC,
                      false);
  SUBCASE("input") { check_grad(x, dx, loss); }
  SUBCASE("weight") { check_grad(w, dw, loss); }
  SUBCASE("bias") { check_grad(b, db, loss); }
  SUBCASE("accumulate adds to what is there") {
    std::vector<float> dw2(w.size(), 1.0f), db2(b.size(), 1.0f);
    k::conv3x3_backward(nullptr, dw2.data(), db2.data(), dcol.data(), r.data(), col.data(), w.data(), B, H, W, C, OC,
                        true);
    for (std::size_t i = 0; i < dw.size(); ++i) CHECK(dw2[i] == doctest::Approx(dw[i] + 1.0f).epsilon(1e-5));
  }
}

TEST_CASE("relu backward passes the gradient where the output is positive") {
  auto x = randn(64, 8);
  const auto r = randn(64, 9);
  std::vector<float> y;
  auto loss = [&] {
    y = x;
    k::relu_forward(y.data(), y.size());
    return dot(y, r);
  };
  loss();
  std::vector<float> d = r;
  k::relu_backward(d.data(), y.data(), d.size());
  check_grad(x, d, loss, 1e-3);
}

TEST_CASE("2x2 max pooling backward routes the gradient to each window's winner") {
  auto x = randn(B * H * W * C, 10);
  const auto r = randn(B * H / 2 * W / 2 * C, 11);
  std::vector<float> out(r.size());
  std::vector<std::uint8_t> arg(r.size());
  auto loss = [&] {
    k::maxpool2_forward(out.data(), arg.data(), x.data(), B, H, W, C);
    return dot(out, r);
  };
  loss();
  std::vector<float> dx(x.size());
  k::maxpool2_backward(dx.data(), r.data(), arg.data(), B, H, W, C);
  check_grad(x, dx, loss, 1e-3);  // eps far below the gaps between random values
}

TEST_CASE("global average and max pooling backward match finite differences") {
  const int HW = H * W;
  auto x = randn(B * HW * C, 12);
  const auto ra = randn(B * C, 13), rm = randn(B * C, 14);
  std::vector<float> avg(B * C), mx(B * C);
  std::vector<std::int32_t> arg(B * C);
  auto loss = [&] {
    k::avgpool_forward(avg.data(), x.data(), B, HW, C);
    k::maxpool_global_forward(mx.data(), arg.data(), x.data(), B, HW, C);
    return dot(avg, ra) + dot(mx, rm);
  };
  loss();
  std::vector<float> dx(x.size());
  k::avgpool_backward(dx.data(), ra.data(), B, HW, C);
  k::maxpool_global_backward(dx.data(), rm.data(), arg.data(), B, HW, C);
  check_grad(x, dx, loss, 1e-3);
}
