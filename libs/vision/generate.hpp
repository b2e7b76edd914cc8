// The built-in labelled image generator: scenes from libs/media/testing.hpp
// (gradients, noise textures, shapes) made blank, blurred, corrupted (real
// JPEG damage, damage.hpp) or covered in glyph rows (text.hpp), plus clean
// ones; many re-encoded as JPEG like the files ingest sees. Deterministic:
// an example depends only on (label, seed). Pure functions; thread-safe.
#pragma once

#include "libs/vision/labels.hpp"

#include <cstdint>
#include <vector>

namespace loom::vision {

// One example of `label`; sides 96-176 pixels, aspect up to 1.8:1.
labelled_image generate_example(image_label label, std::uint64_t seed);

// per_class examples of every label, interleaved (ok, blank, ..., ok, ...);
// example i of label l has seed hash(seed, l, i). Parallel over examples
// (OpenMP); the same result for any thread count.
std::vector<labelled_image> generate_set(std::uint64_t seed, int per_class);

}  // namespace loom::vision
