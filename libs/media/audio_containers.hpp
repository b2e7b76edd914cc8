// Internal: length-only walks of the audio containers for probe_audio(), run
// before any codec sees the bytes: RIFF chunks to "data", FLAC STREAMINFO,
// Ogg pages, MPEG audio frames. They read headers and sizes, never samples,
// and allocate nothing. Pure functions; thread-safe.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <string_view>

namespace loom::media::detail {

inline std::uint8_t u8(std::string_view b, std::size_t at) { return static_cast<std::uint8_t>(b[at]); }

// What a header claims, before libsndfile sees the bytes.
struct header_claim {
  std::uint32_t channels = 0, rate = 0;
  std::uint64_t frames = 0;
  bool length_known = false;
  bool data_cut = false;  // WAV: the data chunk claims more bytes than the file has
};

// RIFF chunks up to "data": fmt (tag, channels, rate, block align) and the
// data size. Frames follow from the size for PCM, float, A-law and mu-law,
// whose block align is one frame; compressed WAVs are left to libsndfile.
// A data size of 0 or 0xFFFFFFFF (a writer that streamed to a pipe and never
// patched it) means the rest of the file. Errors: truncated, corrupt.
result<header_claim> walk_wav(std::string_view b);

// STREAMINFO, the mandatory first metadata block: rate (20 bits), channels - 1
// (3), bits - 1 (5), total samples (36; 0 = unknown). Errors: truncated, corrupt.
result<header_claim> walk_flac(std::string_view b);

// Every page: "OggS", version 0, 27-byte header + lacing table + body inside
// the file, the last one flagged end-of-stream; the first packet Vorbis or
// Opus. Errors: truncated, corrupt, unsupported_format.
status walk_ogg(std::string_view b);

// An ID3v2 tag if any, then MPEG audio frames by their header's length until
// something that is not a frame header (an ID3v1/APE tag, or junk that
// mpg123 would resync over). A frame that runs past the end is truncated; no
// frame at all is corrupt. Free-format frames (bitrate index 0) end the walk.
status walk_mp3(std::string_view b);

}  // namespace loom::media::detail
