// The container walks of audio_containers.hpp.
#include "libs/media/audio_containers.hpp"

#include "libs/media/reject.hpp"

#include <string>

namespace loom::media::detail {
namespace {

std::uint32_t le16(std::string_view b, std::size_t at) { return u8(b, at) | std::uint32_t{u8(b, at + 1)} << 8; }
std::uint32_t le32(std::string_view b, std::size_t at) { return le16(b, at) | le16(b, at + 2) << 16; }

// The byte length of the MPEG audio frame whose header is at b[at], 0 when
// these 4 bytes are no frame header (or a free-format one).
std::size_t mpeg_frame_bytes(std::string_view b, std::size_t at) {
  if (u8(b, at) != 0xFF || (u8(b, at + 1) & 0xE0) != 0xE0) return 0;
  const int version = (u8(b, at + 1) >> 3) & 3;  // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5, 1: reserved
  const int layer = 4 - ((u8(b, at + 1) >> 1) & 3);  // 1..3; 4 = reserved
  const int bitrate_index = u8(b, at + 2) >> 4, rate_index = (u8(b, at + 2) >> 2) & 3;
  const int padding = (u8(b, at + 2) >> 1) & 1;
  if (version == 1 || layer == 4 || bitrate_index == 0 || bitrate_index == 15 || rate_index == 3) return 0;
  // kbit/s by [MPEG-1 layer I, II, III; MPEG-2/2.5 layer I; MPEG-2/2.5 layer II and III][index]
  static constexpr int kbps[5][15] = {
      {0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448},
      {0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384},
      {0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320},
      {0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256},
      {0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}};
  static constexpr int rates[3] = {44100, 48000, 32000};
  const bool mpeg1 = version == 3;
  const int rate = rates[rate_index] >> (mpeg1 ? 0 : version == 2 ? 1 : 2);
  const long bitrate = 1000L * kbps[mpeg1 ? layer - 1 : (layer == 1 ? 3 : 4)][bitrate_index];
  if (layer == 1) return static_cast<std::size_t>((12 * bitrate / rate + padding) * 4);
  const long per_frame = (layer == 3 && !mpeg1) ? 72 : 144;  // 576 vs 1152 samples per frame
  return static_cast<std::size_t>(per_frame * bitrate / rate + padding);
}

}  // namespace

result<header_claim> walk_wav(std::string_view b) {
  header_claim c;
  std::uint32_t tag = 0, block_align = 0;
  bool have_fmt = false;
  std::size_t pos = 12;
  for (;;) {
    if (pos + 8 > b.size()) return reject(reject_reason::truncated, "WAV ends before its data chunk");
    const std::string_view id = b.substr(pos, 4);
    const std::uint64_t size = le32(b, pos + 4);
    if (id == "data") {
      if (!have_fmt) return reject(reject_reason::corrupt, "WAV data chunk before fmt");
      const std::uint64_t present = b.size() - (pos + 8);
      const std::uint64_t bytes = (size == 0 || size == 0xFFFFFFFFu) ? present : size;
      if (tag == 1 || tag == 3 || tag == 6 || tag == 7) {
        c.frames = bytes / block_align;
        c.length_known = true;
        c.data_cut = bytes > present;
      }
      return c;
    }
    if (pos + 8 + size > b.size()) return reject(reject_reason::truncated, "WAV chunk runs past the end");
    if (id == "fmt ") {
      if (size < 16) return reject(reject_reason::corrupt, "WAV fmt chunk of " + std::to_string(size) + " bytes");
      tag = le16(b, pos + 8);
      c.channels = le16(b, pos + 10);
      c.rate = le32(b, pos + 12);
      block_align = le16(b, pos + 20);
      if (tag == 0xFFFE && size >= 40) tag = le16(b, pos + 32);  // WAVE_FORMAT_EXTENSIBLE: the sub-format GUID
      if (c.channels == 0 || c.rate == 0 || block_align == 0)
        return reject(reject_reason::corrupt, "WAV fmt with zero channels, rate or block align");
      have_fmt = true;
    }
    pos += 8 + size + (size & 1);  // chunks are padded to even sizes
  }
}

result<header_claim> walk_flac(std::string_view b) {
  if (b.size() < 42) return reject(reject_reason::truncated, "FLAC ends inside STREAMINFO");
  if ((u8(b, 4) & 0x7F) != 0 || u8(b, 5) != 0 || u8(b, 6) != 0 || u8(b, 7) != 34)
    return reject(reject_reason::corrupt, "FLAC does not start with a 34-byte STREAMINFO");
  header_claim c;
  c.rate = std::uint32_t{u8(b, 18)} << 12 | std::uint32_t{u8(b, 19)} << 4 | u8(b, 20) >> 4;
  c.channels = ((u8(b, 20) >> 1) & 7) + 1;
  c.frames = std::uint64_t{u8(b, 21) & 0x0Fu} << 32 | std::uint64_t{u8(b, 22)} << 24 |
             std::uint64_t{u8(b, 23)} << 16 | std::uint64_t{u8(b, 24)} << 8 | u8(b, 25);
  c.length_known = c.frames != 0;
  if (c.rate == 0) return reject(reject_reason::corrupt, "FLAC STREAMINFO with sample rate 0");
  return c;
}

status walk_ogg(std::string_view b) {
  std::size_t pos = 0;
  std::uint8_t flags = 0;
  while (pos < b.size()) {
    if (pos + 27 > b.size()) return reject(reject_reason::truncated, "Ogg page header past the end");
    if (b.substr(pos, 4) != "OggS" || u8(b, pos + 4) != 0)
      return reject(reject_reason::corrupt, "no Ogg page at byte " + std::to_string(pos));
    flags = u8(b, pos + 5);
    const std::size_t segments = u8(b, pos + 26);
    if (pos + 27 + segments > b.size()) return reject(reject_reason::truncated, "Ogg lacing table past the end");
    std::size_t body = 0;
    for (std::size_t i = 0; i < segments; ++i) body += u8(b, pos + 27 + i);
    if (pos + 27 + segments + body > b.size()) return reject(reject_reason::truncated, "Ogg page body past the end");
    if (pos == 0) {
      const std::string_view packet = b.substr(27 + segments, body);
      if (packet.substr(0, 7) != "\x01vorbis" && packet.substr(0, 8) != "OpusHead")
        return reject(reject_reason::unsupported_format, "Ogg stream is neither Vorbis nor Opus");
    }
    pos += 27 + segments + body;
  }
  if (!(flags & 0x04)) return reject(reject_reason::truncated, "Ogg stream without its end-of-stream page");
  return ok_status();
}

status walk_mp3(std::string_view b) {
  std::size_t pos = 0;
  if (b.substr(0, 3) == "ID3") {  // ID3v2: 10-byte header, syncsafe size, optional 10-byte footer
    if (b.size() < 10) return reject(reject_reason::truncated, "MP3 ends inside its ID3v2 header");
    pos = 10 + (std::size_t{u8(b, 6) & 0x7Fu} << 21 | std::size_t{u8(b, 7) & 0x7Fu} << 14 |
                std::size_t{u8(b, 8) & 0x7Fu} << 7 | (u8(b, 9) & 0x7Fu)) +
          ((u8(b, 5) & 0x10) ? 10 : 0);
    if (pos >= b.size()) return reject(reject_reason::truncated, "MP3 ends inside its ID3v2 tag");
  }
  std::size_t frames = 0;
  for (; pos + 4 <= b.size(); ++frames) {
    const std::size_t len = mpeg_frame_bytes(b, pos);
    if (len == 0) break;
    if (pos + len > b.size())
      return reject(reject_reason::truncated, "MPEG frame " + std::to_string(frames) + " runs past the end");
    pos += len;
  }
  if (frames == 0) {
    if (b.size() - pos < 4) return reject(reject_reason::truncated, "MP3 ends before its first frame");
    return reject(reject_reason::corrupt, "no MPEG audio frame where the first should be");
  }
  return ok_status();
}

}  // namespace loom::media::detail
