// Decoding to RGB8 and metadata-free encoding (libpng, libjpeg-turbo, libwebp,
// giflib underneath; none of their types appear here).
//
// Memory: decode() probes first and refuses before allocating anything sized by
// the image (limits). Our own buffers are at most width * height * 4 bytes
// plus O(width) rows; codec-internal scratch adds, per format: progressive
// JPEG keeps its coefficients (<= 6 B/px, capped through libjpeg's
// max_memory_to_use), lossless WebP its ARGB plane (4 B/px); GIF needs only
// one index row. See README.md for the table.
// Pure functions; thread-safe (each call owns its codec state).
#pragma once

#include "libs/media/image.hpp"
#include "libs/status/status.hpp"

#include <string>
#include <string_view>

namespace loom::media {

// Decodes the first frame to RGB8 with alpha composited onto white.
// Gray, palette, 1-16 bit, gray+alpha and RGBA PNGs; baseline, progressive,
// grayscale and CMYK/YCCK JPEGs (CMYK converted, Adobe inversion honoured);
// lossy, lossless, alpha and animated WebP (frame 1 on a white canvas); GIF
// (frame 1 on a white screen, transparent index -> white). No gamma or ICC
// colour management. Errors: every reject_reason except extension_mismatch.
result<image> decode(std::string_view bytes, const limits& lim = {});

// PNG, 8-bit RGB, zlib level 6: IHDR, IDAT, IEND and nothing else.
// REQUIRES: img.pixels.size() == width * height * 3, width and height > 0.
result<std::string> encode_png(const image& img);

// Baseline JPEG, 4:2:0, quality 1..100 (invalid_argument otherwise): SOI, DQT,
// SOF0, DHT, SOS, EOI only (no JFIF, EXIF, ICC or Adobe segment).
// REQUIRES: as encode_png.
result<std::string> encode_jpeg(const image& img, int quality = 90);

}  // namespace loom::media
