// Fuzzes the audio reader (libs/media, issue 33): an import hands it the
// bytes of any file named .wav .flac .ogg .oga .mp3. Limits are tight (1 s,
// 1 MiB) so a mutated header cannot make the fuzzer run long or out of
// memory. It checks what the API promises: the whole path never succeeds where
// the probe refuses, a refusal of the input carries a reject reason, and what
// comes out is a 16 kHz mono 16-bit WAV no longer than the limit allows, at
// a finite loudness.
#include "libs/media/audio.hpp"
#include "libs/media/reject.hpp"

#include <cmath>
#include <cstdlib>
#include <string_view>

using namespace loom;

namespace {
void require(bool ok) {
  if (!ok) std::abort();  // a broken promise: libFuzzer saves the input
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  media::audio_limits lim;
  lim.max_seconds = 1;
  lim.min_seconds = 0.05;
  lim.max_bytes = 1u << 20;
  (void)media::sniff_audio(bytes);
  const auto info = media::probe_audio(bytes, lim);
  const auto clip = media::process_audio(bytes, lim);
  if (!clip) {
    require(clip.code() == errc::internal || media::reason_of(clip.err()).has_value());
    return 0;
  }
  require(info.ok());
  const std::string& wav = clip->wav;
  require(wav.size() >= 44 && wav.compare(0, 4, "RIFF") == 0 && wav.compare(8, 4, "WAVE") == 0);
  require((wav.size() - 44) % 2 == 0);
  const double seconds = static_cast<double>(wav.size() - 44) / 2 / media::audio_output_rate;
  require(seconds <= lim.max_seconds + 0.01);
  require(std::isfinite(clip->report.loudness_after_lufs) && std::isfinite(clip->report.gain_db));
  return 0;
}
