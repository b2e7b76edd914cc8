// What the network sees of an image: the RGB8 image area-resized to S x S
// (aspect ignored: damage and blur are judged on the whole frame), and three
// cheap hand features: two at 2S x 2S, where a 3x3 Laplacian still sees the
// fine detail the S x S input loses, one at full size on JPEG's 8-pixel
// block grid, which no resize keeps. Pure functions; thread-safe.
#pragma once

#include "libs/media/image.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace loom::vision {

inline constexpr int hand_features = 3;

struct prepared_image {
  std::vector<std::uint8_t> rgb;           // S x S x 3
  std::array<float, hand_features> hand{};  // raw: standardised by the model's hand_mean / hand_std
};

// hand[0] = log(1 + variance of the 3x3 Laplacian of luma) (sharpness: blur
// and flat images are low, text is high); hand[1] = log(1 + standard
// deviation of luma) (contrast: blank images are near 0); hand[2] =
// log((1 + mean |luma step| across the 8-pixel grid lines) / (1 + the same
// off the grid)), at full size: damaged entropy data shifts and recolours
// whole blocks, so its edges fall on the grid, while a picture's edges fall
// anywhere (JPEG's own blockiness adds a little; it is in the ok class too).
// REQUIRES: img non-empty, side >= 8.
prepared_image prepare(const media::image& img, int side);

// x (S,S,3) = (rgb - 127.5) / 64, mirrored left-right when flip.
void to_input(const prepared_image& p, int side, bool flip, float* x);

}  // namespace loom::vision
