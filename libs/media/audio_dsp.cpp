// find_sound(), measure_loudness(), encode_wav16(): the signal steps after
// decoding, on mono samples at any rate (16 kHz in process_audio()).
#include "libs/media/audio.hpp"

#include "libs/media/reject.hpp"

#include <ebur128.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

namespace loom::media {
namespace {

// Silence is decided per 10 ms window: short enough to place an edge within
// the 10 ms the acceptance test allows before refinement, long enough that
// the zero crossings of a low voice do not read as gaps.
constexpr double window_ms = 10;

double to_db(double power) { return power > 0 ? 10 * std::log10(power) : -INFINITY; }

struct ebur128_deleter {
  void operator()(ebur128_state* s) const { ebur128_destroy(&s); }
};

void put_le(std::string& s, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += static_cast<char>(v >> (8 * i));
}

}  // namespace

result<sample_span> find_sound(std::span<const float> x, std::uint32_t rate, const audio_options& opt) {
  const std::size_t w = std::max<std::size_t>(1, static_cast<std::size_t>(rate * window_ms / 1000));
  const std::size_t windows = (x.size() + w - 1) / w;
  auto power = [&](std::size_t k) {  // mean square of window k
    const std::size_t b = k * w, e = std::min(x.size(), b + w);
    double s = 0;
    for (std::size_t i = b; i < e; ++i) s += double{x[i]} * x[i];
    return s / static_cast<double>(e - b);
  };
  double peak = 0;
  for (std::size_t k = 0; k < windows; ++k) peak = std::max(peak, power(k));
  if (to_db(peak) < opt.trim_absolute_dbfs)
    return reject(reject_reason::silent, "loudest 10 ms window at " + std::to_string(to_db(peak)) + " dBFS");
  if (!opt.trim) return sample_span{0, x.size()};
  const double threshold = std::max(peak * std::pow(10, opt.trim_relative_db / 10),
                                    std::pow(10, opt.trim_absolute_dbfs / 10));
  std::size_t first = 0, last = windows - 1;
  while (power(first) < threshold) ++first;  // terminates: the peak window passes
  while (power(last) < threshold) --last;
  // Refine to the sample: the first and last sample whose magnitude reaches
  // the threshold's RMS level, looking one window beyond the loud ones (the
  // onset may sit in a window whose mean is still below the threshold).
  const float level = static_cast<float>(std::sqrt(threshold));
  std::size_t begin = first * w, end = std::min(x.size(), (last + 1) * w);
  for (std::size_t i = first > 0 ? (first - 1) * w : 0; i < x.size(); ++i)
    if (std::fabs(x[i]) >= level) {
      begin = i;
      break;
    }
  for (std::size_t i = std::min(x.size(), (last + 2) * w); i > begin; --i)
    if (std::fabs(x[i - 1]) >= level) {
      end = i;
      break;
    }
  const auto pad = static_cast<std::size_t>(rate * opt.trim_pad_ms / 1000);
  return sample_span{begin > pad ? begin - pad : 0, std::min(x.size(), end + pad)};
}

result<loudness> measure_loudness(std::span<const float> x, std::uint32_t rate) {
  std::unique_ptr<ebur128_state, ebur128_deleter> st(ebur128_init(1, rate, EBUR128_MODE_I | EBUR128_MODE_TRUE_PEAK));
  if (!st) return make_error(errc::internal, "ebur128_init failed");
  if (ebur128_add_frames_float(st.get(), x.data(), x.size()) != EBUR128_SUCCESS)
    return make_error(errc::internal, "ebur128_add_frames_float failed");
  loudness l;
  double peak = 0;
  if (ebur128_loudness_global(st.get(), &l.integrated_lufs) != EBUR128_SUCCESS ||
      ebur128_true_peak(st.get(), 0, &peak) != EBUR128_SUCCESS)
    return make_error(errc::internal, "ebur128 measurement failed");
  if (!std::isfinite(l.integrated_lufs))  // every 400 ms block under the -70 LUFS absolute gate
    return reject(reject_reason::silent, "integrated loudness under the -70 LUFS gate");
  l.true_peak_dbtp = 20 * std::log10(std::max(peak, 1e-10));
  return l;
}

std::string encode_wav16(std::span<const float> x, std::uint32_t rate, std::uint32_t channels, float gain) {
  const auto data_bytes = static_cast<std::uint32_t>(x.size() * 2);
  std::string out;
  out.reserve(44 + std::size_t{data_bytes});
  out += "RIFF";
  put_le(out, 36 + data_bytes, 4);
  out += "WAVEfmt ";
  put_le(out, 16, 4);
  put_le(out, 1, 2);  // WAVE_FORMAT_PCM
  put_le(out, channels, 2);
  put_le(out, rate, 4);
  put_le(out, rate * channels * 2, 4);  // byte rate
  put_le(out, channels * 2, 2);         // block align
  put_le(out, 16, 2);
  out += "data";
  put_le(out, data_bytes, 4);
  // Scaled by 32767 so +1.0 maps to the largest positive sample, as libsndfile does.
  for (float v : x) {
    const long s = std::lrint(std::clamp(v * gain * 32767.0f, -32768.0f, 32767.0f));
    put_le(out, static_cast<std::uint32_t>(s) & 0xFFFF, 2);
  }
  return out;
}

}  // namespace loom::media
