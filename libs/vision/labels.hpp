// The image filter's classes and a labelled example. Plain values;
// thread-safe.
#pragma once

#include "libs/media/image.hpp"

#include <array>
#include <optional>
#include <string_view>

namespace loom::vision {

// What the filter says about an image. Everything but ok is unusable for training.
enum class image_label : int {
  ok = 0,
  blank = 1,        // flat or near-flat: one colour, faint noise, a gradient of a few levels
  blurred = 2,      // heavily: Gaussian sigma >= 2.5 % of the short side
  corrupted = 3,    // decoded from a cut or damaged file: grey bands, shifted/discoloured blocks
  mostly_text = 4,  // glyph rows over most of the image (a scanned page, a screenshot of text)
};
inline constexpr int num_labels = 5;

inline constexpr std::array<std::string_view, num_labels> label_names{"ok", "blank", "blurred", "corrupted",
                                                                      "mostly_text"};
inline std::string_view label_name(image_label l) { return label_names[static_cast<int>(l)]; }
inline std::optional<image_label> parse_label(std::string_view name) {
  for (int i = 0; i < num_labels; ++i)
    if (label_names[i] == name) return static_cast<image_label>(i);
  return std::nullopt;
}

struct labelled_image {
  media::image img;
  image_label label = image_label::ok;
};

}  // namespace loom::vision
