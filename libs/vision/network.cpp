#include "libs/vision/network.hpp"

#include "libs/engine/kernels.hpp"
#include "libs/vision/layers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

namespace loom::vision {

namespace ek = engine::kernels;

status cnn_config::validate() const {
  auto bad = [](std::string what) { return make_error(errc::invalid_argument, "cnn_config: " + what); };
  if (input < 8 || input > 512 || input % 8 != 0) return bad("input side must be a multiple of 8 in [8, 512]");
  for (int c : channels)
    if (c < 1 || c > 512) return bad("channels must be in [1, 512]");
  if (hand < 0 || hand > 16) return bad("hand features must be in [0, 16]");
  if (embed < 1 || embed > 1024) return bad("embed must be in [1, 1024]");
  if (classes < 2 || classes > 64) return bad("classes must be in [2, 64]");
  return ok_status();
}

cnn_layout make_layout(const cnn_config& cfg) {
  cnn_layout l;
  std::size_t at = 0, cin = 3;
  for (int i = 0; i < 4; ++i) {
    const std::size_t oc = std::size_t(cfg.channels[i]);
    l.conv_w[i] = at, at += oc * 9 * cin;
    l.conv_b[i] = at, at += oc;
    cin = oc;
  }
  const std::size_t e = std::size_t(cfg.embed), k = std::size_t(cfg.classes);
  l.fc1_w = at, at += e * (2 * cin + std::size_t(cfg.hand));
  l.fc1_b = at, at += e;
  l.fc2_w = at, at += k * e;
  l.fc2_b = at, at += k;
  l.total = at;
  return l;
}

std::vector<float> init_params(const cnn_config& cfg, std::uint64_t seed) {
  const cnn_layout l = make_layout(cfg);
  std::vector<float> p(l.total, 0.0f);
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 7);
  // Box-Muller on our own uniform bits: std::normal_distribution differs by library.
  auto normal = [&] {
    const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  };
  auto fill = [&](std::size_t off, std::size_t n, std::size_t fan_in) {
    const double s = std::sqrt(2.0 / double(fan_in));
    for (std::size_t i = 0; i < n; ++i) p[off + i] = static_cast<float>(s * normal());
  };
  int cin = 3;
  for (int i = 0; i < 4; ++i) {
    fill(l.conv_w[i], std::size_t(cfg.channels[i]) * 9 * cin, std::size_t(9) * cin);
    cin = cfg.channels[i];
  }
  fill(l.fc1_w, std::size_t(cfg.embed) * (2 * cin + cfg.hand), std::size_t(2 * cin + cfg.hand));
  fill(l.fc2_w, std::size_t(cfg.classes) * cfg.embed, std::size_t(cfg.embed));
  return p;
}

cnn_workspace::cnn_workspace(const cnn_config& cfg, int max_batch)
    : cfg_(cfg), lay_(make_layout(cfg)), max_batch_(max_batch) {
  const std::size_t B = std::size_t(max_batch);
  int s = cfg.input, cin = 3;
  std::size_t max_col = 0, max_z = 0;
  for (int l = 0; l < 4; ++l) {
    side_[l] = s;
    cin_[l] = cin;
    const std::size_t n = B * s * s;
    col_[l].resize(n * 9 * cin);
    z_[l].resize(n * cfg.channels[l]);
    max_col = std::max(max_col, col_[l].size());
    max_z = std::max({max_z, z_[l].size(), n * cin});
    if (l < 3) {
      p_[l].resize(n / 4 * cfg.channels[l]);
      arg_[l].resize(p_[l].size());
      s /= 2;
    }
    cin = cfg.channels[l];
  }
  x_.resize(B * cfg.input * cfg.input * 3);
  const std::size_t f = std::size_t(2 * cin + cfg.hand);
  gmax_arg_.resize(B * cin);
  h0_.resize(B * f);
  e_.resize(B * cfg.embed);
  logits_.resize(B * cfg.classes);
  losses_.resize(B);
  lse_.resize(B);
  row_scale_.resize(B);
  dcol_.resize(max_col);
  dz_.resize(max_z);
  dp_.resize(max_z);
  dlogits_.resize(B * cfg.classes);
  de_.resize(B * cfg.embed);
  dh0_.resize(B * f);
  dg_.resize(B * 2 * cin);
}

const float* cnn_workspace::forward(const float* params, const float* x, const float* hand, int B) {
  const int S = cfg_.input, C4 = cfg_.channels[3], F = 2 * C4 + cfg_.hand;
  if (B < 1 || B > max_batch_) std::abort();  // a broken REQUIRES: buffers are sized for max_batch
  std::copy(x, x + std::size_t(B) * S * S * 3, x_.begin());
  const float* in = x_.data();
  for (int l = 0; l < 4; ++l) {
    const int s = side_[l], oc = cfg_.channels[l];
    kernels::conv3x3_forward(z_[l].data(), col_[l].data(), in, params + lay_.conv_w[l], params + lay_.conv_b[l], B, s,
                             s, cin_[l], oc);
    kernels::relu_forward(z_[l].data(), std::size_t(B) * s * s * oc);
    if (l < 3) {
      kernels::maxpool2_forward(p_[l].data(), arg_[l].data(), z_[l].data(), B, s, s, oc);
      in = p_[l].data();
    }
  }
  // h0 (B, 2*C4 + hand) = [avg(z3) | max(z3) | hand]; dg_ is scratch here.
  const int s3 = side_[3];
  float* avg = dg_.data();
  float* mx = dg_.data() + std::size_t(B) * C4;
  kernels::avgpool_forward(avg, z_[3].data(), B, s3 * s3, C4);
  kernels::maxpool_global_forward(mx, gmax_arg_.data(), z_[3].data(), B, s3 * s3, C4);
  for (int b = 0; b < B; ++b) {
    float* h = h0_.data() + std::size_t(b) * F;
    std::copy_n(avg + std::size_t(b) * C4, C4, h);
    std::copy_n(mx + std::size_t(b) * C4, C4, h + C4);
    std::copy_n(hand + std::size_t(b) * cfg_.hand, cfg_.hand, h + 2 * C4);
  }
  ek::matmul_forward(e_.data(), h0_.data(), params + lay_.fc1_w, params + lay_.fc1_b, B, F, cfg_.embed);
  kernels::relu_forward(e_.data(), std::size_t(B) * cfg_.embed);
  ek::matmul_forward(logits_.data(), e_.data(), params + lay_.fc2_w, params + lay_.fc2_b, B, cfg_.embed,
                     cfg_.classes);
  return logits_.data();
}

float cnn_workspace::backward(const float* params, float* grads, const std::int32_t* targets, int B) {
  const int K = cfg_.classes, E = cfg_.embed, C4 = cfg_.channels[3], F = 2 * C4 + cfg_.hand;
  ek::crossentropy_forward(losses_.data(), lse_.data(), logits_.data(), targets, B, K, K);
  std::fill_n(row_scale_.begin(), B, 1.0f / float(B));
  ek::crossentropy_backward(dlogits_.data(), logits_.data(), lse_.data(), targets, row_scale_.data(), B, K, K);
  double loss = 0;
  for (int b = 0; b < B; ++b) loss += losses_[b];

  ek::matmul_backward(de_.data(), grads + lay_.fc2_w, grads + lay_.fc2_b, dlogits_.data(), e_.data(),
                      params + lay_.fc2_w, B, E, K, false);
  kernels::relu_backward(de_.data(), e_.data(), std::size_t(B) * E);
  ek::matmul_backward(dh0_.data(), grads + lay_.fc1_w, grads + lay_.fc1_b, de_.data(), h0_.data(),
                      params + lay_.fc1_w, B, F, E, false);
  float* davg = dg_.data();
  float* dmax = dg_.data() + std::size_t(B) * C4;
  for (int b = 0; b < B; ++b) {
    std::copy_n(dh0_.data() + std::size_t(b) * F, C4, davg + std::size_t(b) * C4);
    std::copy_n(dh0_.data() + std::size_t(b) * F + C4, C4, dmax + std::size_t(b) * C4);
  }
  const int s3 = side_[3];
  kernels::avgpool_backward(dz_.data(), davg, B, s3 * s3, C4);
  kernels::maxpool_global_backward(dz_.data(), dmax, gmax_arg_.data(), B, s3 * s3, C4);
  // dz_ holds d(z_l) (after ReLU, before pooling); dp_ receives d(input of conv l).
  for (int l = 3; l >= 0; --l) {
    const int s = side_[l], oc = cfg_.channels[l];
    kernels::relu_backward(dz_.data(), z_[l].data(), std::size_t(B) * s * s * oc);
    kernels::conv3x3_backward(l > 0 ? dp_.data() : nullptr, grads + lay_.conv_w[l], grads + lay_.conv_b[l],
                              dcol_.data(), dz_.data(), col_[l].data(), params + lay_.conv_w[l], B, s, s, cin_[l],
                              oc, false);
    if (l > 0) kernels::maxpool2_backward(dz_.data(), dp_.data(), arg_[l - 1].data(), B, side_[l - 1], side_[l - 1],
                                          cin_[l]);
  }
  return static_cast<float>(loss / B);
}

}  // namespace loom::vision
