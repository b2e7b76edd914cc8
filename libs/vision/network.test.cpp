#include "libs/vision/network.hpp"

#include "libs/engine/kernels.hpp"
#include "libs/vision/filter.hpp"
#include "libs/vision/generate.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

namespace lv = loom::vision;

TEST_CASE("the whole network's backward matches finite differences of the loss for every tensor") {
  lv::cnn_config cfg;
  cfg.input = 8;
  cfg.channels = {3, 4, 4, 5};
  cfg.hand = 3;
  cfg.embed = 6;
  REQUIRE(cfg.validate().ok());
  constexpr int B = 3;
  std::vector<float> p = lv::init_params(cfg, 3);
  const lv::cnn_layout lay = lv::make_layout(cfg);
  REQUIRE(p.size() == lay.total);
  std::mt19937_64 rng(5);
  auto unit = [&] { return float(double(rng() >> 11) * 0x1.0p-53 * 2 - 1); };
  std::vector<float> x(B * 8 * 8 * 3), hand(B * 3);
  for (auto& v : x) v = unit();
  for (auto& v : hand) v = unit();
  const std::int32_t targets[B] = {0, 3, 4};
  lv::cnn_workspace ws(cfg, B);
  auto loss = [&] {
    ws.forward(p.data(), x.data(), hand.data(), B);
    std::vector<float> g(lay.total);
    return double(ws.backward(p.data(), g.data(), targets, B));
  };
  ws.forward(p.data(), x.data(), hand.data(), B);
  std::vector<float> grads(lay.total);
  ws.backward(p.data(), grads.data(), targets, B);

  struct tensor { const char* name; std::size_t off, end; };
  const tensor tensors[] = {
      {"conv1.w", lay.conv_w[0], lay.conv_b[0]}, {"conv1.b", lay.conv_b[0], lay.conv_w[1]},
      {"conv2.w", lay.conv_w[1], lay.conv_b[1]}, {"conv2.b", lay.conv_b[1], lay.conv_w[2]},
      {"conv3.w", lay.conv_w[2], lay.conv_b[2]}, {"conv3.b", lay.conv_b[2], lay.conv_w[3]},
      {"conv4.w", lay.conv_w[3], lay.conv_b[3]}, {"conv4.b", lay.conv_b[3], lay.fc1_w},
      {"fc1.w", lay.fc1_w, lay.fc1_b},           {"fc1.b", lay.fc1_b, lay.fc2_w},
      {"fc2.w", lay.fc2_w, lay.fc2_b},           {"fc2.b", lay.fc2_b, lay.total}};
  constexpr double eps = 1e-3;
  for (const auto& t : tensors) {
    int checked = 0, bad = 0;
    double worst = 0;
    for (std::size_t i = t.off; i < t.end; i += std::max<std::size_t>(1, (t.end - t.off) / 12), ++checked) {
      const float keep = p[i];
      p[i] = keep + float(eps);
      const double up = loss();
      p[i] = keep - float(eps);
      const double down = loss();
      p[i] = keep;
      const double num = (up - down) / (2 * eps);
      const double err = std::abs(num - grads[i]) / std::max(1e-2, std::abs(num) + std::abs(grads[i]));
      worst = std::max(worst, err);
      bad += err > 5e-2;  // a ReLU or a pool winner crossed inside ±eps: rare at these scales
    }
    INFO(t.name << ": " << checked << " checked, worst relative error " << worst);
    CHECK(bad <= 1);
    CHECK(checked > 0);
  }
}

TEST_CASE("training twice with the same seed and thread count gives the same weights") {
  loom::engine::kernels::set_threads(2);
  const auto set = lv::generate_set(11, 8);
  lv::filter_options o;
  o.net.input = 32;
  o.net.channels = {8, 8, 16, 16};
  o.epochs = 2;
  o.batch = 8;
  o.seed = 42;
  auto a = lv::train_image_filter(o, set);
  auto b = lv::train_image_filter(o, set);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->params == b->params);
  CHECK(a->embed_mean == b->embed_mean);
  o.seed = 43;
  auto c = lv::train_image_filter(o, set);
  REQUIRE(c.ok());
  CHECK(a->params != c->params);
}

TEST_CASE("bad options and inputs are refused with invalid_argument") {
  lv::filter_options o;
  const std::vector<lv::labelled_image> none;
  CHECK(lv::train_image_filter(o, none).code() == loom::errc::invalid_argument);
  std::vector<lv::labelled_image> one(1);
  auto r = lv::train_image_filter(o, one);
  CHECK(r.code() == loom::errc::invalid_argument);
  CHECK(r.err().message.find("image 0 is empty") != std::string::npos);
  o.net.input = 60;
  CHECK(lv::train_image_filter(o, lv::generate_set(1, 1)).code() == loom::errc::invalid_argument);
}
