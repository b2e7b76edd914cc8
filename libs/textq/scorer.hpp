// scorer: runs a filter_model's GPT over texts and reports, from one forward
// pass per window, the perplexity (mean NLL per byte token), the quality head's
// P(good) and the embedding (ln_f states at word ends, centred, L2-normalised).
// A scorer owns its engine (activations for batch × window) and copies the
// weights: one scorer per thread. The kernels run with the calling thread's
// OpenMP count (engine::kernels::set_threads on that thread; 1 per worker).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "libs/engine/model.hpp"
#include "libs/status/status.hpp"
#include "libs/textq/filter_model.hpp"

namespace loom::textq {

struct text_scores {
  std::size_t bytes = 0;        // bytes scored (a longer text is cut at max_bytes)
  std::size_t tokens = 0;       // predictions scored: bytes + 1 (the end boundary)
  bool truncated = false;       // the text had more than max_bytes
  double mean_nll = 0;          // nats per token
  double perplexity = 1;        // exp(mean_nll)
  float quality = 0.5f;         // P(good) from the head; 0.5 without one
  std::vector<float> pooled;    // C: mean over tokens of ln_f's output (the head's input)
  std::vector<float> embedding; // C: sum over word ends of (state - embed_center[position]), L2-normalised
};

struct scorer_options {
  // Windows per forward in score_batch: 8 × 128 tokens per matmul amortises
  // the per-kernel OpenMP cost; a lone document runs on a batch-1 model.
  int batch = 8;
  // A longer text is scored on its first 64 KiB: its perplexity and mean
  // state are settled long before, and the cost per document stays bounded.
  std::size_t max_bytes = std::size_t{1} << 16;
};

class scorer {
 public:
  // invalid_argument for an invalid model or options; resource_exhausted when
  // the engine cannot allocate. `m` is shared read-only.
  static result<scorer> create(std::shared_ptr<const filter_model> m, scorer_options opt = {});

  // Any bytes: empty, short, non-UTF-8 (an empty text scores its end boundary).
  text_scores score(std::string_view text);
  // out.size() == texts.size(); windows of several texts share each forward.
  void score_batch(std::span<const std::string_view> texts, std::span<text_scores> out);

  double perplexity(std::string_view text) { return score(text).perplexity; }
  float quality(std::string_view text) { return score(text).quality; }
  std::vector<float> embed(std::string_view text) { return score(text).embedding; }

  // The mean ln_f state at word ends at each window position (window × C)
  // over `texts`: train_filter's embedding centre.
  void position_means(std::span<const std::string_view> texts, std::vector<float>& out);

  const filter_model& model() const { return *m_; }

 private:
  scorer() = default;
  struct window_ref {
    std::size_t doc;
    std::size_t first;  // index into that document's tokens of the window's first input
    int n;              // predictions in the window (<= T)
  };
  engine::gpt2* engine_for(int rows);
  void run(std::span<const window_ref> w, std::span<text_scores> out, int B);
  void finish(text_scores& s, std::size_t pooled_n) const;

  std::shared_ptr<const filter_model> m_;
  scorer_options opt_;
  std::optional<engine::gpt2> one_, many_;  // batch 1 and batch opt_.batch, made when first needed
  std::vector<std::vector<std::int32_t>> tokens_;
  std::vector<std::int32_t> in_, tg_;
  std::vector<float> w_, logp_;
  std::vector<std::size_t> pooled_n_;
  std::vector<double>* pos_sum_ = nullptr;  // position_means() only
  std::vector<std::size_t>* pos_n_ = nullptr;
};

}  // namespace loom::textq
