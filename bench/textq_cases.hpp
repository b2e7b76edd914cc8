// The textq benchmark cases as functions (bench only), so that media_bench
// can later print case=ppl_filter itself by including this header and calling
// ppl_filter_case(). Each case scores on the calling thread with one OpenMP
// thread and divides by that thread's CPU time (best of 3 passes): per core.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_util.hpp"
#include "libs/engine/kernels.hpp"
#include "libs/engine/model.hpp"
#include "libs/textq/scorer.hpp"
#include "libs/textq/semantic_dedup.hpp"
#include "libs/textq/testing.hpp"
#include "libs/textq/train.hpp"

namespace loom::bench::textq_cases {

namespace tq = loom::textq;

// The filter the tests train (240 reference documents, 320 labelled ones).
inline std::shared_ptr<const tq::filter_model> train_default(double* seconds) {
  std::vector<std::string> ref;
  for (int i = 0; i < 240; ++i) ref.push_back(tq::testing::clean_prose(10'000 + std::uint64_t(i), 150));
  const auto lab = tq::testing::labelled_set(20'000'000, 160, 40);
  std::vector<std::string_view> rv(ref.begin(), ref.end());
  std::vector<tq::labelled_text> lv;
  for (const auto& l : lab) lv.push_back({l.text, l.good()});
  tq::train_report rep;
  auto m = tq::train_filter(tq::train_options{}, rv, lv, &rep);
  if (!m) {
    std::fprintf(stderr, "textq_bench: training failed: %s\n", m.err().to_string().c_str());
    std::exit(1);
  }
  *seconds = rep.seconds_gpt + rep.seconds_head;
  return std::make_shared<const tq::filter_model>(std::move(*m));
}

// A mixed corpus: half clean prose, the rest every bad kind, 80..200 words.
inline std::vector<std::string> corpus(int n) {
  std::vector<std::string> out;
  for (const auto& l : tq::testing::labelled_set(77'000'000, n / 2, n / 8)) out.push_back(l.text);
  return out;
}

inline std::size_t total_bytes(const std::vector<std::string>& docs) {
  std::size_t b = 0;
  for (const auto& d : docs) b += d.size();
  return b;
}

template <class F>
double best_cpu_s(F&& f) {
  double best = 1e30;
  for (int pass = 0; pass < 3; ++pass) {
    const double t0 = thread_cpu_s();
    f();
    best = std::min(best, thread_cpu_s() - t0);
  }
  return best;
}

// Perplexity scoring of a corpus in batches of 8 windows: MB of text per CPU second.
inline double ppl_filter_case(const std::shared_ptr<const tq::filter_model>& m, const std::vector<std::string>& docs) {
  engine::kernels::set_threads(1);
  auto sc = tq::scorer::create(m);
  std::vector<std::string_view> v(docs.begin(), docs.end());
  std::vector<tq::text_scores> s(v.size());
  const double t = best_cpu_s([&] { sc->score_batch(v, s); });
  const double mbps = double(total_bytes(docs)) / t / 1e6;
  std::printf("case=ppl_filter mb_per_s=%.3f docs=%zu bytes=%zu\n", mbps, docs.size(), total_bytes(docs));
  return mbps;
}

// The importer's path: one document at a time through quality() (the same
// forward as perplexity; the head adds C multiply-adds).
inline double quality_case(const std::shared_ptr<const tq::filter_model>& m, const std::vector<std::string>& docs) {
  engine::kernels::set_threads(1);
  auto sc = tq::scorer::create(m);
  float sink = 0;
  const double t = best_cpu_s([&] {
    for (const auto& d : docs) sink += sc->quality(d);
  });
  const double mbps = double(total_bytes(docs)) / t / 1e6;
  std::printf("case=quality_classifier mb_per_s=%.3f docs=%zu (one document per call; checksum %.3f)\n", mbps,
              docs.size(), double(sink));
  return mbps;
}

// Embedding (batched scoring) plus the exact-scan index, end to end; and the
// index alone at 10^4 kept documents (the O(N·C) scan per document).
inline double semantic_dedup_case(const std::shared_ptr<const tq::filter_model>& m, const std::vector<std::string>& docs) {
  engine::kernels::set_threads(1);
  auto sc = tq::scorer::create(m);
  std::vector<std::string_view> v(docs.begin(), docs.end());
  std::vector<tq::text_scores> s(v.size());
  const std::size_t C = std::size_t(m->config.channels);
  std::size_t flagged = 0;
  const double t = best_cpu_s([&] {
    sc->score_batch(v, s);
    tq::semantic_index idx(C, 0.9f);
    flagged = 0;
    for (const auto& x : s) flagged += idx.check_and_add(x.embedding).has_value();
  });
  // The scan alone: 10^4 kept unit vectors, 1,000 queries.
  tq::semantic_index big(C, 2.0f);  // threshold above any cosine: every vector is kept
  std::vector<float> e(C);
  std::uint64_t x = 88172645463325252ull;
  auto unit = [&] {
    double n = 0;
    for (auto& f : e) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; f = float(double(x >> 11) / 9007199254740992.0 - 0.5); n += double(f) * f; }
    for (auto& f : e) f = float(f / std::sqrt(n));
  };
  for (int i = 0; i < 10'000; ++i) { unit(); (void)big.check_and_add(e); }
  const double t0 = thread_cpu_s();
  for (int i = 0; i < 1000; ++i) { unit(); (void)big.nearest(e); }
  const double scan_s = (thread_cpu_s() - t0) / 1000;
  const double dps = double(docs.size()) / t;
  std::printf("case=semantic_dedup_scan kept=10000 dim=%zu us_per_doc=%.1f\n", C, scan_s * 1e6);
  std::printf("case=semantic_dedup docs_per_s=%.1f docs=%zu flagged=%zu\n", dps, docs.size(), flagged);
  return dps;
}

// Why bytes: one forward of a (B=1, T=128) window through the byte model and
// through the same blocks with GPT-2's vocabulary (V 50257, Vp 50304), in
// microseconds per byte of text, taking a GPT-2 token as ~4 bytes of English.
inline void vocab_case(const tq::filter_model& m) {
  engine::kernels::set_threads(1);
  for (int V : {tq::byte_vocab, 50257}) {
    auto cfg = m.config;
    cfg.vocab = V;
    cfg.padded_vocab = V == tq::byte_vocab ? tq::byte_padded_vocab : 50304;
    auto g = engine::gpt2::create(cfg, 1, m.window);
    g->init_random(1);
    std::vector<std::int32_t> in(std::size_t(m.window), 65), tg(std::size_t(m.window), 66);
    const double t = best_cpu_s([&] { for (int i = 0; i < 20; ++i) (void)g->forward(in, tg); }) / 20;
    const double bytes = V == tq::byte_vocab ? m.window : 4.0 * m.window;
    std::printf("case=ppl_vocab V=%d us_per_window=%.0f us_per_byte=%.2f\n", V, t * 1e6, t * 1e6 / bytes);
  }
}

}  // namespace loom::bench::textq_cases
