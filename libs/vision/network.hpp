// The image filter's convolutional network: its shape (cnn_config), where
// each tensor lives in the flat parameter vector (cnn_layout), and a
// workspace that runs forward and the hand-written backward over a batch.
// A cnn_workspace owns its activation buffers and is used by one thread at
// a time; parameters and gradients belong to the caller.
#pragma once

#include "libs/status/status.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::vision {

// Input (B, S, S, 3) -> 3 x [conv3x3 + ReLU + maxpool2] -> conv3x3 + ReLU
// -> [global average pool (B, C4) | global max pool (B, C4) | hand features
// (B, hand)] -> fc1 + ReLU (B, embed) -> fc2 (B, classes) logits. The max
// pool answers "is there damage anywhere" (a band of shifted blocks is a
// small part of the frame that an average dilutes).
struct cnn_config {
  int input = 64;                          // S: 64 keeps a 3x3 glyph stroke and JPEG block damage visible
  std::array<int, 4> channels{16, 32, 64, 64};
  int hand = 3;                            // hand features (features.hpp: hand_features); 0 = none
  int embed = 64;                          // fc1 width
  int classes = 5;

  // invalid_argument unless S is a multiple of 8 in [8, 512], channels in
  // [1, 512], hand in [0, 16], embed in [1, 1024], classes in [2, 64].
  status validate() const;
  bool operator==(const cnn_config&) const = default;
};

// Offsets (in floats) of every tensor in the parameter vector.
struct cnn_layout {
  std::array<std::size_t, 4> conv_w{}, conv_b{};  // conv l: weight (C_l, 9*C_{l-1}), bias (C_l)
  std::size_t fc1_w = 0, fc1_b = 0;               // (embed, 2*C4 + hand), (embed)
  std::size_t fc2_w = 0, fc2_b = 0;               // (classes, embed), (classes)
  std::size_t total = 0;
};
cnn_layout make_layout(const cnn_config& cfg);

// He-normal weights (std sqrt(2 / fan_in)), zero biases, from our own
// generator (the same floats on every platform for a seed).
std::vector<float> init_params(const cnn_config& cfg, std::uint64_t seed);

class cnn_workspace {
 public:
  // REQUIRES: cfg.validate().ok(), max_batch >= 1. Allocates every buffer.
  cnn_workspace(const cnn_config& cfg, int max_batch);

  // x (B,S,S,3), hand (B,hand) -> logits (B,classes), valid until the next
  // forward. Saves what backward needs. REQUIRES: 1 <= B <= max_batch.
  const float* forward(const float* params, const float* x, const float* hand, int B);

  // After forward over the same B: mean cross-entropy of the logits against
  // targets (B) in [0, classes), and grads (layout.total) = its gradient
  // with respect to params (overwritten).
  float backward(const float* params, float* grads, const std::int32_t* targets, int B);

  // After forward: the last conv block's output after ReLU, (B, S/8, S/8, C4).
  const float* last_block() const { return z_[3].data(); }
  const cnn_config& config() const { return cfg_; }
  const cnn_layout& layout() const { return lay_; }

 private:
  cnn_config cfg_;
  cnn_layout lay_;
  int max_batch_;
  std::array<int, 4> side_{};   // spatial side of conv l's input and output
  std::array<int, 4> cin_{};    // conv l's input channels
  std::vector<float> x_;                          // (B,S,S,3)
  std::array<std::vector<float>, 4> col_, z_;     // im2col (N_l, 9C), conv+ReLU out (B,s,s,C_l)
  std::array<std::vector<float>, 3> p_;           // pooled (B,s/2,s/2,C_l)
  std::array<std::vector<std::uint8_t>, 3> arg_;  // pool winners
  std::vector<std::int32_t> gmax_arg_;            // (B, C4)
  std::vector<float> h0_, e_, logits_, losses_, lse_, row_scale_;
  std::vector<float> dcol_, dz_, dp_, dlogits_, de_, dh0_, dg_;
};

}  // namespace loom::vision
