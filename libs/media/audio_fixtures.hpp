// Test-only audio files for media_tests: any libsndfile format written to
// memory (sf_open_virtual in write mode: FLAC, Ogg/Vorbis, Ogg/Opus, MP3 via
// LAME, WAV variants), speech from espeak-ng, and header surgery. Errors
// abort: these only ever see their own valid input. Single-threaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::media::testing {

// Interleaved float samples encoded by libsndfile; sf_format is
// SF_FORMAT_<major> | SF_FORMAT_<subtype> from sndfile.h.
std::string sf_encode(const std::vector<float>& interleaved, std::uint32_t rate, std::uint32_t channels,
                      int sf_format);

// Whether the linked libsndfile can write sf_format (MP3 needs LAME).
bool sf_can_write(int sf_format, std::uint32_t rate, std::uint32_t channels);

// Decodes any file libsndfile reads to interleaved float (for checking outputs).
struct decoded {
  std::vector<float> samples;
  std::uint32_t rate = 0, channels = 0;
};
decoded sf_decode(const std::string& bytes);

// `espeak-ng -w <tmp> "<text>"` (22.05 kHz mono 16-bit WAV); nullopt when
// espeak-ng is not installed.
std::optional<std::string> espeak(const std::string& text);

// Little-endian field surgery.
void set_le16(std::string& s, std::size_t at, std::uint32_t v);
void set_le32(std::string& s, std::size_t at, std::uint32_t v);

}  // namespace loom::media::testing
