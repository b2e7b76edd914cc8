// Internal: walks over the container structure of PNG, WebP (RIFF), JPEG and
// GIF files, reading lengths and headers only (no decompression, no CRCs but
// IHDR's). probe() uses them for truncation, frame counts and alpha flags;
// scan_metadata() for the metadata segments. Header-only; pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace loom::media::detail {

enum class walk_end { complete, truncated, corrupt };

inline std::uint32_t be16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return std::uint32_t{u[0]} << 8 | u[1];
}
inline std::uint32_t be32(const char* p) { return be16(p) << 16 | be16(p + 2); }
inline std::uint32_t le16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return std::uint32_t{u[1]} << 8 | u[0];
}
inline std::uint32_t le32(const char* p) { return le16(p + 2) << 16 | le16(p); }

// PNG chunks after the 8-byte signature, IHDR first, through IEND:
// f(type, data) -> bool (false stops the walk early: complete). Missing IEND
// or a chunk running past the end: truncated.
template <class F>
walk_end walk_png(std::string_view b, F&& f) {
  std::size_t pos = 8;
  while (true) {
    if (pos + 12 > b.size()) return walk_end::truncated;
    const std::uint32_t len = be32(b.data() + pos);
    if (len > 0x7fffffffu) return walk_end::corrupt;  // the PNG spec's bound
    if (b.size() - pos - 12 < len) return walk_end::truncated;
    const auto type = b.substr(pos + 4, 4);
    if (!f(type, b.substr(pos + 8, len))) return walk_end::complete;
    if (type == "IEND") return walk_end::complete;
    pos += 12 + std::size_t{len};
  }
}

// WebP's top-level RIFF chunks: f(fourcc, data) -> bool. The RIFF size
// running past the end of the bytes: truncated.
template <class F>
walk_end walk_riff(std::string_view b, F&& f) {
  if (b.size() < 12) return walk_end::truncated;
  const std::uint64_t riff_end = std::uint64_t{le32(b.data() + 4)} + 8;
  if (riff_end > b.size()) return walk_end::truncated;
  if (riff_end < 12) return walk_end::corrupt;
  std::size_t pos = 12;
  while (pos + 8 <= riff_end) {
    const std::uint32_t len = le32(b.data() + pos + 4);
    if (len > riff_end - pos - 8) return walk_end::corrupt;
    if (!f(b.substr(pos, 4), b.substr(pos + 8, len))) return walk_end::complete;
    pos += 8 + std::size_t{len} + (len & 1);  // chunks are padded to even sizes
  }
  return walk_end::complete;
}

// JPEG marker segments after SOI up to the first SOS or EOI: f(marker,
// payload) -> bool, marker without its 0xFF, payload without the length.
template <class F>
walk_end walk_jpeg(std::string_view b, F&& f) {
  std::size_t pos = 2;
  while (true) {
    if (pos >= b.size()) return walk_end::truncated;
    if (static_cast<unsigned char>(b[pos]) != 0xFF) return walk_end::corrupt;
    while (pos < b.size() && static_cast<unsigned char>(b[pos]) == 0xFF) ++pos;  // fill bytes
    if (pos >= b.size()) return walk_end::truncated;
    const auto marker = static_cast<unsigned char>(b[pos++]);
    if (marker == 0xD9) return walk_end::complete;                       // EOI
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // TEM, RSTn: no length
    if (pos + 2 > b.size()) return walk_end::truncated;
    const std::uint32_t len = be16(b.data() + pos);
    if (len < 2) return walk_end::corrupt;
    if (pos + len > b.size()) return walk_end::truncated;
    if (!f(marker, b.substr(pos + 2, len - 2))) return walk_end::complete;
    if (marker == 0xDA) return walk_end::complete;  // SOS: entropy-coded data follows
    pos += len;
  }
}

// A GIF's block structure, as far as the walk got.
struct gif_layout {
  std::uint32_t screen_w = 0, screen_h = 0;
  int colour_bits = 0;  // of the global colour table, else of frame 1's local one
  std::uint32_t frames = 0;
  std::uint32_t frame_w = 0, frame_h = 0;  // frame 1
  bool transparency = false;               // a graphic control extension with the flag
};

// Header, screen descriptor, then every extension and image block to the
// trailer, skipping sub-blocks by their length bytes. f(label, first
// sub-block) is called for each extension. No trailer: truncated.
template <class F>
walk_end walk_gif(std::string_view b, gif_layout& g, F&& f) {
  if (b.size() < 13) return walk_end::truncated;
  g.screen_w = le16(b.data() + 6);
  g.screen_h = le16(b.data() + 8);
  const auto packed = static_cast<unsigned char>(b[10]);
  std::size_t pos = 13;
  if (packed & 0x80) {
    g.colour_bits = (packed & 7) + 1;
    pos += 3u << g.colour_bits;
  }
  const auto skip_sub_blocks = [&](std::string_view* first) {
    bool is_first = true;
    while (true) {
      if (pos >= b.size()) return false;
      const auto n = static_cast<unsigned char>(b[pos++]);
      if (n == 0) return true;
      if (pos + n > b.size()) return false;
      if (first && is_first) *first = b.substr(pos, n);
      is_first = false;
      pos += n;
    }
  };
  while (true) {
    if (pos >= b.size()) return walk_end::truncated;
    const auto tag = static_cast<unsigned char>(b[pos++]);
    if (tag == 0x3B) return walk_end::complete;  // trailer
    if (tag == 0x21) {                           // extension
      if (pos >= b.size()) return walk_end::truncated;
      const auto label = static_cast<unsigned char>(b[pos++]);
      std::string_view first;
      if (!skip_sub_blocks(&first)) return walk_end::truncated;
      if (label == 0xF9 && first.size() >= 4 && (first[0] & 1)) g.transparency = true;
      f(label, first);
    } else if (tag == 0x2C) {  // image descriptor
      if (pos + 9 > b.size()) return walk_end::truncated;
      const auto fpacked = static_cast<unsigned char>(b[pos + 8]);
      if (g.frames++ == 0) {
        g.frame_w = le16(b.data() + pos + 4);
        g.frame_h = le16(b.data() + pos + 6);
        if (g.colour_bits == 0 && (fpacked & 0x80)) g.colour_bits = (fpacked & 7) + 1;
      }
      pos += 9;
      if (fpacked & 0x80) pos += 3u << ((fpacked & 7) + 1);
      if (pos >= b.size()) return walk_end::truncated;
      const auto min_code = static_cast<unsigned char>(b[pos++]);
      if (min_code < 1 || min_code > 11) return walk_end::corrupt;
      if (!skip_sub_blocks(nullptr)) return walk_end::truncated;
    } else {
      return walk_end::corrupt;
    }
  }
}

}  // namespace loom::media::detail
