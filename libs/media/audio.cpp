// process_audio(): the per-clip path ingest runs, top to bottom.
#include "libs/media/audio.hpp"

#include "libs/media/audio_sndfile.hpp"
#include "libs/media/reject.hpp"

#include <ebur128.h>

#include <cmath>
#include <cstring>
#include <memory>

namespace loom::media {
namespace {

// Integrated loudness of 16-bit mono PCM (the data chunk encode_wav16 wrote).
double output_loudness(std::string_view pcm, std::uint32_t rate) {
  ebur128_state* st = ebur128_init(1, rate, EBUR128_MODE_I);
  if (!st) return NAN;
  short block[4096];
  for (std::size_t at = 0; at < pcm.size(); at += sizeof block) {
    const std::size_t n = std::min(sizeof block, pcm.size() - at);
    std::memcpy(block, pcm.data() + at, n);  // little-endian host (x86-64, aarch64)
    ebur128_add_frames_short(st, block, n / 2);
  }
  double l = NAN;
  ebur128_loudness_global(st, &l);
  ebur128_destroy(&st);
  return l;
}

}  // namespace

std::string_view audio_format_name(audio_format f) {
  switch (f) {
    case audio_format::wav: return "wav";
    case audio_format::flac: return "flac";
    case audio_format::ogg: return "ogg";
    case audio_format::mp3: return "mp3";
  }
  return "unknown";
}

result<audio_clip> process_audio(std::string_view bytes, const audio_limits& lim, const audio_options& opt) {
  audio_clip clip;
  audio_report& r = clip.report;
  auto info = probe_audio(bytes, lim);
  if (!info) return info.err();
  r.source = std::move(*info);

  auto mono = detail::decode_probed(bytes, r.source, lim);
  if (!mono) return mono.err();
  const std::uint32_t rate = mono->rate;
  r.seconds_decoded = mono->seconds();

  auto span = find_sound(mono->samples, rate, opt);
  if (!span) return span.err();
  const std::span<const float> kept = std::span<const float>(mono->samples).subspan(span->begin, span->end - span->begin);
  r.trimmed_start_ms = 1000.0 * static_cast<double>(span->begin) / rate;
  r.trimmed_end_ms = 1000.0 * static_cast<double>(mono->samples.size() - span->end) / rate;
  r.seconds_out = static_cast<double>(kept.size()) / rate;
  if (r.seconds_out < lim.min_seconds)
    return reject(reject_reason::too_short, std::to_string(r.seconds_out) + " s of sound after trimming");

  auto l = measure_loudness(kept, rate);
  if (!l) return l.err();
  r.loudness_before_lufs = l->integrated_lufs;
  r.true_peak_before_dbtp = l->true_peak_dbtp;
  r.gain_db = opt.target_lufs - l->integrated_lufs;
  // The clip guard: never push the true peak over the ceiling. A clip whose
  // crest factor does not fit (peak - loudness > ceiling - target, 22 dB at
  // the defaults) ends up quieter than the target, and the report says so.
  if (l->true_peak_dbtp + r.gain_db > opt.true_peak_ceiling_dbtp) {
    r.gain_db = opt.true_peak_ceiling_dbtp - l->true_peak_dbtp;
    r.peak_limited = true;
  }
  clip.wav = encode_wav16(kept, rate, 1, static_cast<float>(std::pow(10.0, r.gain_db / 20)));
  r.loudness_after_lufs = output_loudness(std::string_view(clip.wav).substr(44), rate);
  return clip;
}

}  // namespace loom::media
