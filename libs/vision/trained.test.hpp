// The model the acceptance, dedup and bench-style tests share: trained once
// per test binary on the built-in generator (fixed seeds), 2 threads.
// Test-only; call from the doctest thread.
#pragma once

#include "libs/engine/kernels.hpp"
#include "libs/files/test_cache.hpp"
#include "libs/vision/filter.hpp"
#include "libs/vision/generate.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace loom::vision::testing {

// 500 per class x 5 labels, 6 epochs (the defaults): 0.97 held-out
// accuracy, ~65 s on 2 shared cores (README, "Measured").
inline constexpr int train_per_class = 500;
inline constexpr std::uint64_t train_seed = 1, heldout_seed = 2;

inline filter_options test_options() {
  filter_options o;
  o.seed = 7;
  return o;
}

inline const image_filter_model& trained_model() {
  static const image_filter_model m = [] {
    engine::kernels::set_threads(2);
    // Made by an earlier process of this very binary: the same bytes training would give.
    const std::string cached = files::testing::test_cache_path("vision-trained");
    if (auto m = load(cached); m.ok()) return std::move(*m);
    const auto t0 = std::chrono::steady_clock::now();
    const auto set = generate_set(train_seed, train_per_class);
    const auto t1 = std::chrono::steady_clock::now();
    filter_options o = test_options();
    o.on_epoch = [](int e, float loss, float acc) { std::printf("epoch %d loss %.4f train_accuracy %.4f\n", e, loss, acc); };
    auto r = train_image_filter(o, set);
    const auto t2 = std::chrono::steady_clock::now();
    if (!r) {
      std::fprintf(stderr, "training failed: %s\n", r.err().to_string().c_str());
      std::abort();
    }
    std::printf("generate %.1f s, train %.1f s (%zu images)\n", std::chrono::duration<double>(t1 - t0).count(),
                std::chrono::duration<double>(t2 - t1).count(), set.size());
    (void)save(*r, cached);  // best effort: the next process trains again when it failed
    return std::move(*r);
  }();
  return m;
}

}  // namespace loom::vision::testing
