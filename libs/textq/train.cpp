#include "libs/textq/train.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "libs/engine/kernels.hpp"
#include "libs/engine/optimizer.hpp"
#include "libs/engine/train_step.hpp"
#include "libs/files/files.hpp"
#include "libs/textq/scorer.hpp"

namespace loom::textq {
namespace {

using clk = std::chrono::steady_clock;
double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

// Restores the caller's OpenMP thread count on every return path.
struct thread_scope {
  int saved;
  explicit thread_scope(int n) : saved(engine::kernels::threads()) { engine::kernels::set_threads(n); }
  ~thread_scope() { engine::kernels::set_threads(saved); }
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const std::size_t i = std::size_t(pos);
  const double f = pos - double(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// The GPT over the training documents' byte stream, windows drawn at random.
status train_gpt(const train_options& opt, const std::vector<std::string_view>& docs, filter_model& m,
                 train_report& rep) {
  std::vector<std::int32_t> stream, t;
  for (auto d : docs) {
    to_tokens(d, opt.max_bytes, t);
    stream.insert(stream.end(), t.begin(), t.end() - 1);  // one boundary between documents
  }
  stream.push_back(boundary_token);
  const std::size_t T = std::size_t(opt.window), B = std::size_t(opt.batch);
  if (stream.size() < T + 1)
    return make_error(errc::invalid_argument, "train_filter: the reference has " + std::to_string(stream.size()) +
                                                  " tokens, fewer than one window (" + std::to_string(T + 1) + ")");
  auto g = engine::gpt2::create(opt.config, opt.batch, opt.window);
  if (!g) return g.err();
  g->init_random(opt.seed);
  engine::adamw adam(g->params().size(), engine::adamw_config{0.9f, 0.95f, 1e-8f, 0.0f}, g->layout().ranges());
  const engine::lr_schedule sched{opt.max_lr, opt.max_lr / 10, opt.warmup_steps, opt.steps};
  std::mt19937_64 rng(opt.seed ^ 0x7465787471ull);
  std::vector<std::int32_t> in(B * T), tg(B * T);
  for (int step = 0; step < opt.steps; ++step) {
    for (std::size_t b = 0; b < B; ++b) {
      const std::size_t at = rng() % (stream.size() - T);
      std::copy_n(stream.begin() + std::ptrdiff_t(at), T, in.begin() + std::ptrdiff_t(b * T));
      std::copy_n(stream.begin() + std::ptrdiff_t(at + 1), T, tg.begin() + std::ptrdiff_t(b * T));
      // Every window starts on the boundary token, in training and in scoring,
      // so that no window's states depend on the arbitrary byte it was cut at
      // (attention leans on the first position). Measured: no change in the
      // paraphrase cosines, within noise on quality; kept for that invariance.
      in[b * T] = boundary_token;
    }
    const engine::micro_batch mb{in, tg, {}};
    auto st = engine::train_step(*g, adam, sched, opt.grad_clip, step, {&mb, 1});
    if (!st) return st.err();
    if (step == 0) rep.first_loss = st->loss;
    rep.final_loss = st->loss;
  }
  rep.steps = opt.steps;
  m.params.assign(g->params().begin(), g->params().end());
  return ok_status();
}

// Logistic regression on standardised features, folded back to raw features.
void train_head(const train_options& opt, const std::vector<std::vector<float>>& x, const std::vector<bool>& good,
                filter_model& m) {
  const std::size_t n = x.size(), C = x[0].size();
  std::vector<double> mean(C, 0), sd(C, 0);
  for (const auto& v : x)
    for (std::size_t c = 0; c < C; ++c) mean[c] += v[c] / double(n);
  for (const auto& v : x)
    for (std::size_t c = 0; c < C; ++c) sd[c] += (v[c] - mean[c]) * (v[c] - mean[c]) / double(n);
  for (auto& s : sd) s = std::sqrt(s) + 1e-6;
  const double n_good = double(std::count(good.begin(), good.end(), true));
  const double wg = 0.5 / n_good, wb = 0.5 / (double(n) - n_good);  // equal class mass
  std::vector<double> w(C, 0), grad(C);
  double b = 0;
  for (int it = 0; it < opt.head_iters; ++it) {
    std::fill(grad.begin(), grad.end(), 0.0);
    double gb = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double z = b;
      for (std::size_t c = 0; c < C; ++c) z += w[c] * (x[i][c] - mean[c]) / sd[c];
      const double p = 1 / (1 + std::exp(-z));
      const double e = (p - (good[i] ? 1.0 : 0.0)) * (good[i] ? wg : wb);
      for (std::size_t c = 0; c < C; ++c) grad[c] += e * (x[i][c] - mean[c]) / sd[c];
      gb += e;
    }
    for (std::size_t c = 0; c < C; ++c) w[c] -= opt.head_lr * (grad[c] + opt.head_l2 * w[c]);
    b -= opt.head_lr * gb;
  }
  m.quality_w.assign(C, 0.0f);
  double braw = b;
  for (std::size_t c = 0; c < C; ++c) {
    m.quality_w[c] = float(w[c] / sd[c]);
    braw -= w[c] * mean[c] / sd[c];
  }
  m.quality_b = float(braw);
  m.has_quality_head = true;
}

}  // namespace

result<filter_model> train_filter(const train_options& opt, std::span<const std::string_view> reference,
                                  std::span<const labelled_text> labelled, train_report* report) {
  auto bad = [](const std::string& w) { return make_error(errc::invalid_argument, "train_filter: " + w); };
  if (opt.window < 1 || opt.window > opt.config.max_seq_len) return bad("window must be in [1, config.max_seq_len]");
  if (opt.batch < 1 || opt.steps < 1 || opt.threads < 1 || opt.holdout_every < 2) return bad("batch, steps, threads >= 1; holdout_every >= 2");
  if (opt.config.vocab != byte_vocab) return bad("config.vocab must be " + std::to_string(byte_vocab) + " (bytes)");
  if (!(opt.head_quantile > 0 && opt.head_quantile <= opt.middle_quantile && opt.middle_quantile < 1))
    return bad("need 0 < head_quantile <= middle_quantile < 1");
  if (reference.size() < 2) return bad("need at least 2 reference documents (one is held out)");
  std::size_t n_good = 0;
  for (const auto& l : labelled) n_good += l.good;
  if (!labelled.empty() && (n_good == 0 || n_good == labelled.size())) return bad("labelled examples need both classes");

  thread_scope threads(opt.threads);
  train_report rep;
  std::vector<std::string_view> fit, held;
  for (std::size_t i = 0; i < reference.size(); ++i) (i % std::size_t(opt.holdout_every) == 1 ? held : fit).push_back(reference[i]);
  rep.reference_docs = fit.size();
  rep.holdout_docs = held.size();

  auto t0 = clk::now();
  filter_model m;
  m.config = opt.config;
  m.window = opt.window;
  if (auto s = train_gpt(opt, fit, m, rep); !s) return s.err();
  const std::size_t C = std::size_t(opt.config.channels);
  m.quality_w.assign(C, 0.0f);
  m.embed_center.assign(std::size_t(opt.window) * C, 0.0f);
  m.head_max = m.middle_max = 0;
  rep.seconds_gpt = since(t0);

  t0 = clk::now();
  auto shared = std::make_shared<filter_model>(m);
  auto sc = scorer::create(shared, {8, opt.max_bytes});
  if (!sc) return sc.err();
  // Buckets and centre from held-out reference documents (at least 8 when the
  // reference has them: a quantile of 2 values is no distribution).
  std::vector<std::string_view> probe = held;
  for (std::size_t i = 0; probe.size() < std::min<std::size_t>(8, reference.size()) && i < fit.size(); ++i) probe.push_back(fit[i]);
  std::vector<text_scores> s(probe.size());
  sc->score_batch(probe, s);
  std::vector<double> ppl;
  for (const auto& x : s) {
    ppl.push_back(x.perplexity);
  }
  sc->position_means(probe, m.embed_center);
  m.head_max = float(quantile(ppl, opt.head_quantile));
  m.middle_max = float(quantile(ppl, opt.middle_quantile));
  rep.holdout_ppl_median = quantile(ppl, 0.5);

  if (!labelled.empty()) {
    std::vector<std::string_view> texts;
    std::vector<bool> good;
    for (const auto& l : labelled) texts.push_back(l.text), good.push_back(l.good);
    std::vector<text_scores> ls(texts.size());
    sc->score_batch(texts, ls);
    std::vector<std::vector<float>> x;
    for (auto& l : ls) x.push_back(std::move(l.pooled));
    train_head(opt, x, good, m);
    rep.labelled_docs = labelled.size();
  }
  rep.seconds_head = since(t0);
  if (report) *report = rep;
  if (auto v = m.validate(); !v) return v.err();
  return m;
}

result<filter_model> train_filter_files(const train_options& opt, std::span<const std::string> reference_paths,
                                        std::span<const std::string> good_paths, std::span<const std::string> bad_paths,
                                        train_report* report) {
  std::vector<std::string> ref, lab;
  for (const auto& p : reference_paths) {
    auto b = files::read_file(p);
    if (!b) return b.err();
    ref.push_back(std::move(*b));
  }
  std::vector<bool> good;
  for (auto* paths : {&good_paths, &bad_paths})
    for (const auto& p : *paths) {
      auto b = files::read_file(p);
      if (!b) return b.err();
      lab.push_back(std::move(*b));
      good.push_back(paths == &good_paths);
    }
  std::vector<std::string_view> rv(ref.begin(), ref.end());
  std::vector<labelled_text> lv;
  for (std::size_t i = 0; i < lab.size(); ++i) lv.push_back({lab[i], good[i]});
  return train_filter(opt, rv, lv, report);
}

}  // namespace loom::textq
