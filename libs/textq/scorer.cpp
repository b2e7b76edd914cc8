#include "libs/textq/scorer.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace loom::textq {
namespace {

bool is_word_end(std::int32_t next) {
  return next == ' ' || next == '\n' || next == '.' || next == ',' || next == boundary_token;
}

}  // namespace

result<scorer> scorer::create(std::shared_ptr<const filter_model> m, scorer_options opt) {
  if (!m) return make_error(errc::invalid_argument, "textq::scorer: no model");
  if (auto s = m->validate(); !s) return s.err();
  if (opt.batch < 1 || opt.max_bytes < 1) return make_error(errc::invalid_argument, "textq::scorer: batch and max_bytes must be >= 1");
  scorer sc;
  sc.m_ = std::move(m);
  sc.opt_ = opt;
  if (sc.engine_for(1) == nullptr) return make_error(errc::resource_exhausted, "textq::scorer: cannot allocate the engine");
  return sc;
}

engine::gpt2* scorer::engine_for(int rows) {
  auto& slot = rows == 1 ? one_ : many_;
  if (!slot) {
    auto g = engine::gpt2::create(m_->config, rows, m_->window);
    if (!g) return nullptr;
    std::memcpy(g->params().data(), m_->params.data(), m_->params.size() * sizeof(float));
    slot.emplace(std::move(*g));
  }
  return &*slot;
}

// Forward over up to B windows (unused rows: boundary inputs, weight 0), then
// each real position's -log p and ln_f state summed into its document.
void scorer::run(std::span<const window_ref> w, std::span<text_scores> out, int B) {
  const int T = m_->window;
  const std::size_t C = std::size_t(m_->config.channels);
  engine::gpt2* g = engine_for(B);
  if (g == nullptr) {
    std::fprintf(stderr, "textq::scorer: cannot allocate a batch-%d engine\n", B);
    std::abort();  // create() allocated the batch-1 engine; batch B is a few MB more
  }
  const std::size_t N = std::size_t(B) * T;
  in_.assign(N, boundary_token);
  tg_.assign(N, 0);
  w_.assign(N, 0.0f);
  logp_.resize(N);
  for (std::size_t b = 0; b < w.size(); ++b) {
    const auto& t = tokens_[w[b].doc];
    for (int i = 0; i < w[b].n; ++i) {
      in_[b * T + i] = t[w[b].first + i];
      tg_[b * T + i] = t[w[b].first + i + 1];
      w_[b * T + i] = 1.0f;
    }
    in_[b * T] = boundary_token;  // every window starts on the boundary (train.cpp says why)
  }
  auto loss = g->forward(in_, tg_, w_);
  if (!loss) {  // only an interrupt or a bad id can fail it; neither can happen here
    std::fprintf(stderr, "textq::scorer: forward failed: %s\n", loss.err().to_string().c_str());
    std::abort();
  }
  g->token_logprobs(logp_);
  const float* h = g->hidden().data();
  for (std::size_t b = 0; b < w.size(); ++b) {
    text_scores& s = out[w[b].doc];
    for (int i = 0; i < w[b].n; ++i) {
      s.mean_nll -= logp_[b * T + i];  // a sum until finish()
      const float* hv = h + (b * T + i) * C;
      for (std::size_t c = 0; c < C; ++c) s.pooled[c] += hv[c];
      ++pooled_n_[w[b].doc];
      const float* ctr = m_->embed_center.data() + std::size_t(i) * C;  // this position's reference mean
      // The embedding pools word ends only (the next byte is a space, newline,
      // '.', ',' or the end): there the state holds the word just read, while
      // mid-word states mostly encode spelling. Measured on paraphrase pairs
      // (semantic_dedup.test.cpp): median cosine 0.70 over all positions,
      // 0.84 over word ends; distinct documents stay near 0.01.
      const std::int32_t nx = tg_[b * T + i];
      if (!is_word_end(nx)) continue;
      for (std::size_t c = 0; c < C; ++c) s.embedding[c] += hv[c] - ctr[c];
      if (pos_sum_) {
        for (std::size_t c = 0; c < C; ++c) (*pos_sum_)[std::size_t(i) * C + c] += hv[c];
        ++(*pos_n_)[std::size_t(i)];
      }
    }
  }
}

void scorer::finish(text_scores& s, std::size_t pooled_n) const {
  const std::size_t C = s.pooled.size();
  const double n = double(s.tokens), np = double(pooled_n);
  s.mean_nll /= n;
  s.perplexity = std::exp(s.mean_nll);
  double z = m_->quality_b, norm = 0;
  for (std::size_t c = 0; c < C; ++c) {
    s.pooled[c] = float(s.pooled[c] / np);
    z += double(m_->quality_w[c]) * s.pooled[c];
    norm += double(s.embedding[c]) * s.embedding[c];
  }
  s.quality = m_->has_quality_head ? float(1.0 / (1.0 + std::exp(-z))) : 0.5f;
  if (norm > 0)
    for (auto& e : s.embedding) e = float(e / std::sqrt(norm));
}

void scorer::score_batch(std::span<const std::string_view> texts, std::span<text_scores> out) {
  const int T = m_->window;
  const std::size_t C = std::size_t(m_->config.channels);
  if (tokens_.size() < texts.size()) tokens_.resize(texts.size());
  pooled_n_.assign(texts.size(), 0);
  std::vector<window_ref> windows;
  for (std::size_t d = 0; d < texts.size(); ++d) {
    to_tokens(texts[d], opt_.max_bytes, tokens_[d]);
    text_scores& s = out[d];
    s = {};
    s.bytes = tokens_[d].size() - 2;
    s.truncated = texts[d].size() > opt_.max_bytes;
    s.tokens = s.bytes + 1;
    s.pooled.assign(C, 0.0f);
    s.embedding.assign(C, 0.0f);
    for (std::size_t first = 0; first < s.tokens; first += std::size_t(T))
      windows.push_back({d, first, int(std::min<std::size_t>(std::size_t(T), s.tokens - first))});
  }
  const std::size_t B = std::size_t(opt_.batch);
  std::size_t i = 0;
  for (; B > 1 && i + B <= windows.size(); i += B) run({windows.data() + i, B}, out, int(B));
  for (; i < windows.size(); ++i) run({windows.data() + i, 1}, out, 1);
  for (std::size_t d = 0; d < texts.size(); ++d) finish(out[d], pooled_n_[d]);
}

void scorer::position_means(std::span<const std::string_view> texts, std::vector<float>& out) {
  const std::size_t T = std::size_t(m_->window), C = std::size_t(m_->config.channels);
  std::vector<double> sum(T * C, 0.0);
  std::vector<std::size_t> n(T, 0);
  pos_sum_ = &sum;
  pos_n_ = &n;
  std::vector<text_scores> s(texts.size());
  score_batch(texts, s);
  pos_sum_ = nullptr;
  pos_n_ = nullptr;
  out.assign(T * C, 0.0f);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t c = 0; c < C; ++c) out[t * C + c] = n[t] ? float(sum[t * C + c] / double(n[t])) : 0.0f;
}

text_scores scorer::score(std::string_view text) {
  text_scores s;
  score_batch({&text, 1}, {&s, 1});
  return s;
}

}  // namespace loom::textq
