#include "services/trainer/hpo/trial_score.hpp"

#include "libs/runspec/input_files.hpp"
#include "libs/engine/model.hpp"
#include "services/trainer/run/text_data.hpp"

#include <algorithm>

namespace loom::trainer {

struct trial_scorer::model {
  engine::gpt2 net;
};

trial_scorer::trial_scorer(trial_scorer&&) noexcept = default;
trial_scorer& trial_scorer::operator=(trial_scorer&&) noexcept = default;
trial_scorer::~trial_scorer() = default;

result<trial_scorer> trial_scorer::make(const runspec::run_config& c, const std::string& eval_text) {
  const std::string path = eval_text.empty() ? c.text : eval_text;
  const std::string what = eval_text.empty() ? "data.text " + path + " (its tail, for hpo scoring)" : "hpo.validation " + path;
  if (path.empty())
    return make_error(errc::invalid_argument, "an hpo trial without hpo.validation scores the tail of data.text; "
                                              "this run has none: set hpo.validation");
  // Bounded by the key's cap (runspec/schema.hpp): the worker checked the file; one that grew since is refused.
  auto text = runspec::read_input(eval_text.empty() ? "data.text" : "hpo.validation", path);
  if (!text) return text.err();  // names the key and the file
  std::string_view held = *text;
  if (eval_text.empty()) held = held.substr(held.size() - held.size() / 20);
  trial_scorer s;
  if (c.tokenizer == "bytes") {
    for (unsigned char ch : held) s.ids_.push_back(ch);
  } else {
    auto bpe = load_run_tokenizer(c.tokenizer);
    if (!bpe) return bpe.err();
    for (auto id : bpe->encode(held)) s.ids_.push_back(static_cast<std::int32_t>(id));
  }
  s.seq_len_ = c.seq_len;
  if (s.ids_.size() < std::size_t(c.seq_len) + 2)
    return make_error(errc::invalid_argument, what + ": " + std::to_string(s.ids_.size()) +
                                                  " tokens, fewer than one window of train.seq_len + 1");
  for (auto id : s.ids_)
    if (id >= c.model.vocab) return make_error(errc::invalid_argument, what + ": a token id beyond model.vocab");
  auto net = engine::gpt2::create(c.model, eval_batch, c.seq_len);
  if (!net) return net.err();
  s.m_ = std::make_unique<model>(model{std::move(*net)});
  return s;
}

result<double> trial_scorer::score(std::span<const float> params) {
  auto dst = m_->net.params();
  if (params.size() != dst.size()) return make_error(errc::invalid_argument, "hpo scoring: parameter count differs");
  std::copy(params.begin(), params.end(), dst.begin());
  const int B = eval_batch, T = seq_len_;
  std::vector<std::int32_t> in(std::size_t(B) * T), tgt(in.size());
  const std::size_t span = ids_.size() - std::size_t(T) - 1;
  const std::size_t windows = std::size_t(eval_batches) * B;
  double sum = 0;
  for (int e = 0; e < eval_batches; ++e) {
    for (int b = 0; b < B; ++b) {
      const std::size_t start = (std::size_t(e) * B + b) * span / windows;
      for (int t = 0; t < T; ++t) {
        in[std::size_t(b) * T + t] = ids_[start + t];
        tgt[std::size_t(b) * T + t] = ids_[start + t + 1];
      }
    }
    auto l = m_->net.forward(in, tgt);
    if (!l) return l.err();
    sum += *l;
  }
  return sum / eval_batches;
}

}  // namespace loom::trainer
