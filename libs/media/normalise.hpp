// Geometry for storage and hashing: area-average resampling, crops, and the
// normalisation ingest applies before encoding what it stores. Pure
// functions; thread-safe.
#pragma once

#include "libs/media/image.hpp"

#include <cstdint>

namespace loom::media {

enum class fit_mode {
  fit,          // keep the aspect ratio, longest side <= max_side
  center_crop,  // cut the centred square of side min(w, h), then <= max_side
};

struct normalise_policy {
  std::uint32_t max_side = 512;  // REQUIRES: > 0
  fit_mode mode = fit_mode::fit;
};

// Downscales (never upscales) by area averaging; a copy when already small enough.
image normalise(const image& img, const normalise_policy& policy = {});

// Area-average resampling to w x h (each output pixel is the coverage-weighted
// mean of the source pixels under it; upsampling degenerates to box sampling).
// REQUIRES: w, h > 0 and img non-empty.
image resize_area(const image& img, std::uint32_t w, std::uint32_t h);

// The w x h rectangle at (x, y). REQUIRES: it lies inside img.
image crop(const image& img, std::uint32_t x, std::uint32_t y, std::uint32_t w, std::uint32_t h);

// The kernel under resize_area and phash: area-average resampling of 8-bit
// samples with c interleaved channels to floats; src is sw x sh x c, dst is
// dw x dh x c. Scratch: 2 x dw x c floats.
void resize_plane(const std::uint8_t* src, std::uint32_t sw, std::uint32_t sh, int c, float* dst, std::uint32_t dw,
                  std::uint32_t dh);

}  // namespace loom::media
