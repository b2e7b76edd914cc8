// Image fingerprints for dedup (issue 33): a DCT perceptual hash for near
// duplicates (re-encoded, rescaled, slightly cropped copies) and a SHA-256 of
// the decoded pixels for exact duplicates. Pure functions; thread-safe.
#pragma once

#include "libs/crypto/hash.hpp"
#include "libs/media/image.hpp"

#include <cstdint>

namespace loom::media {

// Near-duplicate threshold: hamming(phash(a), phash(b)) <= this means "same
// image". Distances are even (every hash has 32 bits set, ties aside), so 14
// admits 0..14. Chosen on the generated set of phash.test.cpp: 3-5 % crops
// are the hardest variant (mean distance ~9.5); the closest distinct pair
// sits at 12 and 2 of 19900 distinct pairs fall within 14 (README has the
// measured recall and precision).
inline constexpr int phash_threshold = 14;

// pHash: luma (BT.601) -> 32x32 by area averaging -> 2-D DCT-II -> the 8x8
// coefficients at u, v in 1..8 (row and column 0, and so DC, left out as in
// the pHash library's ph_dct_imagehash) -> bit (u-1)*8 + (v-1) set when the
// coefficient is above the median of those 64.
// REQUIRES: img.width, img.height > 0.
std::uint64_t phash(const image& img);

int hamming(std::uint64_t a, std::uint64_t b);

// SHA-256 over width (u32 little endian), height (u32 little endian), pixels:
// equal for two files that decode to identical pixels.
crypto::digest pixel_digest(const image& img);

}  // namespace loom::media
