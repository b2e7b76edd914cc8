// vision_bench: per-core throughput of the CNN image filter (issue 33, part
// 4): classify (prepare: resize to 64x64 + hand features, forward) and train
// (forward + backward + AdamW step) on generated images (libs/vision's
// generator, fixed seeds), one OpenMP thread, best of 3 passes of CPU time
// on this thread (the box is shared).
// Last lines, for scripts:
//   case=cnn_classify images_per_s=<..>
//   case=cnn_train images_per_s=<..>
#include "bench/bench_util.hpp"
#include "libs/engine/kernels.hpp"
#include "libs/vision/filter.hpp"
#include "libs/vision/generate.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using loom::bench::loadavg;
using loom::bench::thread_cpu_s;
namespace lv = loom::vision;

namespace {

constexpr int per_class = 40;  // 200 images, ~135x135 on average
constexpr int passes = 3;

}  // namespace

int main() {
  loom::engine::kernels::set_threads(1);
  const auto set = lv::generate_set(1, per_class);
  std::vector<loom::media::image> imgs;
  for (const auto& e : set) imgs.push_back(e.img);

  // Train: one epoch over the set per pass, from scratch each time.
  lv::filter_options o;
  o.epochs = 1;
  double train_best = 1e30;
  lv::image_filter_model model;
  for (int p = 0; p < passes; ++p) {
    const double t0 = thread_cpu_s();
    auto m = lv::train_image_filter(o, set);
    const double t = thread_cpu_s() - t0;
    if (!m) {
      std::fprintf(stderr, "train: %s\n", m.err().to_string().c_str());
      return 1;
    }
    train_best = std::min(train_best, t);
    model = std::move(*m);
  }

  double batch_best = 1e30, single_best = 1e30;
  std::size_t sink = 0;
  for (int p = 0; p < passes; ++p) {
    double t0 = thread_cpu_s();
    for (const auto& c : lv::classify_all(model, imgs)) sink += static_cast<std::size_t>(c.label);
    batch_best = std::min(batch_best, thread_cpu_s() - t0);
    t0 = thread_cpu_s();
    for (const auto& img : imgs) sink += static_cast<std::size_t>(lv::classify(model, img).label);
    single_best = std::min(single_best, thread_cpu_s() - t0);
  }
  const double n = double(imgs.size());
  std::printf("images=%zu input=%dx%d threads=1 load=\"%s\" sink=%zu\n", imgs.size(), o.net.input, o.net.input,
              loadavg().c_str(), sink);
  std::printf("classify one at a time: %.1f images/s\n", n / single_best);
  std::printf("train (prepare + %d epoch, batch %d): %.1f s\n", o.epochs, o.batch, train_best);
  std::printf("case=cnn_classify images_per_s=%.1f\n", n / batch_best);
  std::printf("case=cnn_train images_per_s=%.1f\n", n * o.epochs / train_best);
}
