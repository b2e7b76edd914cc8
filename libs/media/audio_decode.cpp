// decode_mono(): libsndfile blocks -> channel mean -> libsamplerate to 16 kHz,
// streamed, so nothing the size of the source's decoded samples ever exists.
#include "libs/media/audio.hpp"

#include "libs/media/audio_sndfile.hpp"
#include "libs/media/reject.hpp"

#include <samplerate.h>

#include <cmath>
#include <memory>
#include <string>

namespace loom::media {
namespace {

// Frames per libsndfile read: 4096 x 8 channels x 4 B = 128 KiB at most, and
// large enough that per-call overheads vanish against the resampler's work.
constexpr sf_count_t block_frames = 4096;

// libsamplerate's sinc converter at medium quality: 97 dB SNR with a flat
// passband to 90 % of the output Nyquist (7.2 kHz at 16 kHz), which covers
// the speech band. SRC_SINC_BEST_QUALITY (97 %) costs 4.3x the CPU for the
// 7.2-7.8 kHz strip (237 vs 55 ms per 10 s of 44.1 kHz mono, README);
// SRC_LINEAR and SRC_ZERO_ORDER_HOLD alias.
constexpr int converter = SRC_SINC_MEDIUM_QUALITY;

// A header's length may be an estimate (MP3 without a Xing frame): a stream
// this much shorter than claimed is truncated. Two MPEG-1 layer III frames
// (2 x 1152) + 1 % absorb encoder padding and estimates; WAV and FLAC
// headers are exact.
bool short_of_claim(const audio_info& info, std::uint64_t got) {
  if (!info.length_known || got >= info.frames) return false;
  if (info.fmt == audio_format::wav || info.fmt == audio_format::flac) return true;
  const double slack = 2 * 1152 + 0.01 * static_cast<double>(info.frames);
  return static_cast<double>(info.frames - got) > slack;
}

struct src_deleter {
  void operator()(SRC_STATE* s) const { src_delete(s); }
};

// Feeds `in` (end_of_input with an empty `in` flushes) and appends what comes out.
status resample(SRC_STATE* st, double ratio, const float* in, long n, bool last, std::vector<float>& scratch,
                std::vector<float>& out) {
  SRC_DATA d{};
  d.src_ratio = ratio;
  d.end_of_input = last ? 1 : 0;
  d.data_in = in;
  d.input_frames = n;
  for (;;) {
    d.data_out = scratch.data();
    d.output_frames = static_cast<long>(scratch.size());
    if (const int e = src_process(st, &d); e != 0)
      return make_error(errc::internal, std::string("libsamplerate: ") + src_strerror(e));
    out.insert(out.end(), scratch.begin(), scratch.begin() + d.output_frames_gen);
    d.data_in += d.input_frames_used;
    d.input_frames -= d.input_frames_used;
    if (d.input_frames == 0 && (!last || d.output_frames_gen == 0)) return ok_status();
  }
}

}  // namespace

result<mono_audio> decode_mono(std::string_view bytes, const audio_limits& lim) {
  auto info = probe_audio(bytes, lim);
  if (!info) return info.err();
  return detail::decode_probed(bytes, *info, lim);
}

result<mono_audio> detail::decode_probed(std::string_view bytes, const audio_info& info, const audio_limits& lim) {
  auto sf = detail::sndfile_reader::open(bytes);
  if (!sf) return sf.err();
  const std::uint32_t channels = info.channels;
  const double ratio = static_cast<double>(audio_output_rate) / info.sample_rate;
  // The decode guard: whatever the header said, no more than max_seconds.
  const auto max_frames = static_cast<std::uint64_t>(std::ceil(lim.max_seconds * info.sample_rate));

  mono_audio out;
  // Sized by a length the limits have already accepted, never by a raw claim.
  if (info.length_known) out.samples.reserve(static_cast<std::size_t>(std::ceil(info.frames * ratio)) + 64);
  std::unique_ptr<SRC_STATE, src_deleter> src;
  if (info.sample_rate != audio_output_rate) {
    int e = 0;
    src.reset(src_new(converter, 1, &e));
    if (!src) return make_error(errc::internal, std::string("libsamplerate: ") + src_strerror(e));
  }
  std::vector<float> block(static_cast<std::size_t>(block_frames) * channels), mono(block_frames),
      scratch(static_cast<std::size_t>(std::ceil(block_frames * ratio)) + 64);
  std::uint64_t got = 0;
  for (;;) {
    const sf_count_t n = sf_readf_float(sf->get(), block.data(), block_frames);
    if (n <= 0) break;
    got += static_cast<std::uint64_t>(n);
    if (got > max_frames)
      return reject(reject_reason::too_long, "decoded more than " + std::to_string(lim.max_seconds) + " s");
    const float scale = 1.0f / static_cast<float>(channels);
    for (sf_count_t i = 0; i < n; ++i) {  // the channel mean keeps the level of correlated channels
      float s = 0;
      for (std::uint32_t c = 0; c < channels; ++c) s += block[static_cast<std::size_t>(i) * channels + c];
      mono[static_cast<std::size_t>(i)] = s * scale;
    }
    if (!src) {
      out.samples.insert(out.samples.end(), mono.begin(), mono.begin() + n);
    } else if (auto st = resample(src.get(), ratio, mono.data(), static_cast<long>(n), false, scratch, out.samples);
               !st) {
      return st.err();
    }
  }
  if (src) {
    if (auto st = resample(src.get(), ratio, mono.data(), 0, true, scratch, out.samples); !st) return st.err();
  }
  if (short_of_claim(info, got))
    return reject(reject_reason::truncated, "decoded " + std::to_string(got) + " of " +
                                                std::to_string(info.frames) + " frames the header claims");
  if (got == 0) return reject(reject_reason::truncated, "no samples decoded");
  return out;
}

}  // namespace loom::media
