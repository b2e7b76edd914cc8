#include "services/trainer/run/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace loom::trainer {
namespace {

}  // namespace

std::size_t pick(std::span<const float> logits, float temperature, int top_k, double u,
                 std::vector<std::pair<float, std::uint32_t>>& scratch) {
  const std::size_t n = logits.size();
  if (temperature <= 0.0f)
    return static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  scratch.resize(n);
  for (std::size_t i = 0; i < n; ++i) scratch[i] = {logits[i], static_cast<std::uint32_t>(i)};
  std::size_t k = top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(top_k), n) : n;
  // Highest logit first; ties by lower id, so the order is total and deterministic.
  auto higher = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  std::partial_sort(scratch.begin(), scratch.begin() + static_cast<long>(k), scratch.end(), higher);
  const double top = scratch[0].first;
  double total = 0;
  for (std::size_t i = 0; i < k; ++i) total += std::exp((scratch[i].first - top) / temperature);
  double target = u * total, acc = 0;
  for (std::size_t i = 0; i < k; ++i) {
    acc += std::exp((scratch[i].first - top) / temperature);
    if (target < acc) return scratch[i].second;
  }
  return scratch[k - 1].second;
}

result<std::vector<std::uint32_t>> generate(engine::gpt2& model, std::span<const std::uint32_t> prompt,
                                            const sample_options& o) {
  const auto& cfg = model.config();
  if (prompt.empty()) return make_error(errc::invalid_argument, "sample: empty prompt");
  if (o.temperature < 0) return make_error(errc::invalid_argument, "sample: temperature must be >= 0");
  for (std::uint32_t id : prompt)
    if (id >= static_cast<std::uint32_t>(cfg.vocab))
      return make_error(errc::invalid_argument, "sample: token id " + std::to_string(id) + " outside the vocabulary");
  const std::size_t T = static_cast<std::size_t>(model.seq_len());
  const std::size_t Vp = static_cast<std::size_t>(cfg.padded_vocab);
  std::vector<std::uint32_t> seq(prompt.begin(), prompt.end());
  std::vector<std::int32_t> window(T, 0);
  std::vector<std::pair<float, std::uint32_t>> scratch;
  rng64 rng{o.seed};
  std::vector<std::uint32_t> out;
  for (int i = 0; i < o.max_tokens; ++i) {
    const std::size_t len = std::min(seq.size(), T);  // the last T tokens are the context
    std::fill(window.begin(), window.end(), 0);
    std::copy(seq.end() - static_cast<long>(len), seq.end(), window.begin());
    if (auto r = model.forward(window); !r) return r.err();
    std::span<const float> row = model.logits().subspan((len - 1) * Vp, static_cast<std::size_t>(cfg.vocab));
    const auto next = static_cast<std::uint32_t>(pick(row, o.temperature, o.top_k, rng.uniform(), scratch));
    if (next == o.stop_token) break;
    seq.push_back(next);
    out.push_back(next);
  }
  return out;
}

}  // namespace loom::trainer
