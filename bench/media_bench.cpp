// media_bench: single-threaded throughput of the image path ingest will run
// per image (issue 33): probe (header + limits) -> decode to RGB8 ->
// normalise (fit, longest side 512) -> pHash. Input: 200 generated 640x480
// scenes (gradients, noise textures, shapes; libs/media/testing.hpp), each
// encoded once as JPEG (q=85, 4:2:0) and once as PNG (level 6). images/s
// divides by this thread's CPU time (best of 3 passes: the box is shared),
// i.e. per core.
// Audio: 20 generated 10 s clips of 44.1 kHz stereo speech-like signal as
// 16-bit WAV (1.76 MB each); per clip process_audio(): probe + decode +
// downmix + resample to 16 kHz + trim + EBU R128 loudness + 16-bit WAV out
// (and the output measured again). audio_s_per_s = seconds of source audio
// per second of this thread's CPU, best of 3 passes.
// Last lines, for scripts:
//   case=image_jpeg images_per_s=<..>
//   case=image_png images_per_s=<..>
//   case=audio audio_s_per_s=<..>
//   case=ppl_filter mb_per_s=<..>   (the learned text filter: bench/textq_cases.hpp)
#include "bench/bench_util.hpp"
#include "bench/textq_cases.hpp"
#include "libs/media/audio.hpp"
#include "libs/media/audio_testing.hpp"
#include "libs/media/codec.hpp"
#include "libs/media/normalise.hpp"
#include "libs/media/phash.hpp"
#include "libs/media/probe.hpp"
#include "libs/media/testing.hpp"

#include <algorithm>
#include <span>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using loom::bench::loadavg;
using loom::bench::thread_cpu_s;

namespace {

constexpr int images = 200;
constexpr int passes = 3;
constexpr std::uint32_t width = 640, height = 480;

struct stages {
  double probe = 0, decode = 0, normalise = 0, phash = 0;
  double total() const { return probe + decode + normalise + phash; }
};

// One pass over the files; per-stage CPU seconds.
stages run(const std::vector<std::string>& files, std::uint64_t& sink) {
  using namespace loom::media;
  stages s;
  for (const auto& f : files) {
    double t0 = thread_cpu_s();
    const auto info = probe(f);
    if (!info) std::abort();
    double t1 = thread_cpu_s();
    auto img = decode(f);
    if (!img) {
      std::fprintf(stderr, "decode: %s\n", img.err().to_string().c_str());
      std::abort();
    }
    double t2 = thread_cpu_s();
    const image n = normalise(*img, {512, fit_mode::fit});
    double t3 = thread_cpu_s();
    sink += phash(n);
    double t4 = thread_cpu_s();
    s.probe += t1 - t0;
    s.decode += t2 - t1;
    s.normalise += t3 - t2;
    s.phash += t4 - t3;
  }
  return s;
}

stages best_of(const std::vector<std::string>& files, std::uint64_t& sink) {
  stages best;
  best.decode = 1e9;
  for (int p = 0; p < passes; ++p) {
    const stages s = run(files, sink);
    if (s.total() < best.total()) best = s;
  }
  return best;
}

constexpr int clips = 20;
constexpr double clip_s = 10;
constexpr std::uint32_t clip_rate = 44100, clip_channels = 2;

struct audio_stages {
  double whole = 1e9;                                  // process_audio, best pass
  double probe = 0, decode = 0, trim = 0, loudness = 0, encode = 0;  // one pass through the stage functions
};

audio_stages run_audio(const std::vector<std::string>& files, std::uint64_t& sink) {
  using namespace loom::media;
  audio_stages s;
  for (int p = 0; p < passes; ++p) {
    const double t0 = thread_cpu_s();
    for (const auto& f : files) {
      auto clip = process_audio(f);
      if (!clip) {
        std::fprintf(stderr, "process_audio: %s\n", clip.err().to_string().c_str());
        std::abort();
      }
      sink += clip->wav.size();
    }
    s.whole = std::min(s.whole, thread_cpu_s() - t0);
  }
  for (const auto& f : files) {
    double t0 = thread_cpu_s();
    if (!probe_audio(f)) std::abort();
    double t1 = thread_cpu_s();
    auto mono = decode_mono(f);
    if (!mono) std::abort();
    double t2 = thread_cpu_s();
    const auto span = find_sound(mono->samples, mono->rate);
    if (!span) std::abort();
    const auto kept = std::span<const float>(mono->samples).subspan(span->begin, span->end - span->begin);
    double t3 = thread_cpu_s();
    const auto l = measure_loudness(kept, mono->rate);
    if (!l) std::abort();
    double t4 = thread_cpu_s();
    sink += encode_wav16(kept, mono->rate, 1, 0.5f).size();
    double t5 = thread_cpu_s();
    s.probe += t1 - t0;
    s.decode += t2 - t1;
    s.trim += t3 - t2;
    s.loudness += t4 - t3;
    s.encode += t5 - t4;
  }
  return s;
}

double mb(const std::vector<std::string>& files) {
  double n = 0;
  for (const auto& f : files) n += static_cast<double>(f.size());
  return n / 1e6;
}

}  // namespace

int main() {
  using namespace loom::media;
  std::printf("media_bench: %d scenes of %ux%u, loadavg %s\n", images, width, height, loadavg().c_str());
  std::vector<std::string> jpegs, pngs;
  for (int i = 0; i < images; ++i) {
    const image img = testing::scene(7000 + static_cast<std::uint64_t>(i), width, height);
    auto j = encode_jpeg(img, 85);
    auto p = encode_png(img);
    if (!j || !p) std::abort();
    jpegs.push_back(std::move(*j));
    pngs.push_back(std::move(*p));
  }
  std::uint64_t sink = 0;
  const stages jpeg = best_of(jpegs, sink), png = best_of(pngs, sink);
  for (const auto& [name, files, s] : {std::tuple{"jpeg", &jpegs, jpeg}, std::tuple{"png", &pngs, png}}) {
    std::printf("%-4s: %6.1f images/s, %.1f MB input (%.1f KB/image); ms per image: probe %.3f decode %.2f "
                "normalise %.2f phash %.3f\n",
                name, images / s.total(), mb(*files), mb(*files) * 1e3 / images, s.probe * 1e3 / images,
                s.decode * 1e3 / images, s.normalise * 1e3 / images, s.phash * 1e3 / images);
  }
  std::vector<std::string> wavs;
  for (int i = 0; i < clips; ++i)
    wavs.push_back(encode_wav16(testing::speechlike(900 + static_cast<std::uint64_t>(i), clip_s, clip_rate, clip_channels),
                                clip_rate, clip_channels));
  const audio_stages a = run_audio(wavs, sink);
  const double audio_s = clips * clip_s;
  std::printf("audio: %d clips of %.0f s %u Hz x %u WAV, %.1f MB; %.1f s of audio per CPU s; ms per clip: probe %.3f "
              "decode+resample %.1f trim %.2f loudness %.2f encode %.2f\n",
              clips, clip_s, clip_rate, clip_channels, mb(wavs), audio_s / a.whole, a.probe * 1e3 / clips,
              a.decode * 1e3 / clips, a.trim * 1e3 / clips, a.loudness * 1e3 / clips, a.encode * 1e3 / clips);
  std::printf("loadavg after: %s (checksum %llu)\n", loadavg().c_str(), static_cast<unsigned long long>(sink & 0xff));
  std::printf("case=image_jpeg images_per_s=%.1f\n", images / jpeg.total());
  std::printf("case=image_png images_per_s=%.1f\n", images / png.total());
  std::printf("case=audio audio_s_per_s=%.1f\n", audio_s / a.whole);
  // The learned text filter's perplexity scoring (libs/textq; textq_bench has its other cases).
  double train_s = 0;
  const auto model = loom::bench::textq_cases::train_default(&train_s);
  loom::bench::textq_cases::ppl_filter_case(model, loom::bench::textq_cases::corpus(200));
}
