#include "sim/hpo/local_search.hpp"

#include "sim/text/byte_text.hpp"

#include "libs/engine/kernels.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"
#include "libs/engine/train_step.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

namespace loom::sim {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();


// The base config with one trial's overrides applied.
result<search_config> settings_of(search_config c, const hpo::trial_config& t) {
  bool min_lr_set = false;
  float min_lr = 0;
  for (const hpo::assignment& a : t.values) {
    const auto f = static_cast<float>(a.value);
    const auto i = static_cast<int>(a.value);
    if (a.key == "optim.lr") c.lr = f;
    else if (a.key == "optim.min_lr") min_lr = f, min_lr_set = true;
    else if (a.key == "optim.warmup_steps") c.warmup = i;
    else if (a.key == "optim.weight_decay") c.weight_decay = f;
    else if (a.key == "optim.beta1") c.beta1 = f;
    else if (a.key == "optim.beta2") c.beta2 = f;
    else if (a.key == "optim.eps") c.eps = f;
    else if (a.key == "optim.grad_clip") c.grad_clip = f;
    else if (a.key == "train.batch") c.batch = i;
    else if (a.key == "train.seed") c.seed = static_cast<std::uint64_t>(a.value);
    else return make_error(errc::invalid_argument, "local search: " + a.key + " is not varied by the local harness");
  }
  if (min_lr_set) c.min_lr_ratio = c.lr > 0 ? min_lr / c.lr : 0;
  if (c.batch < 1 || c.lr <= 0 || c.warmup < 0)
    return make_error(errc::invalid_argument, "local search: trial " + t.text() + " is out of range");
  return c;
}

// One trial in memory: where it stopped is where it goes on.
struct trial_state {
  search_config cfg;
  engine::gpt2 model;
  engine::adamw opt;
  window_stream stream;
  engine::lr_schedule schedule;
  std::int64_t step = 0;
};

class harness {
 public:
  harness(const search_config& base, const search_data& data, const std::vector<hpo::trial_config>& trials,
          std::int64_t total_steps)
      : base_(base), data_(data), configs_(trials), total_(total_steps), states_(trials.size()) {}

  status check() const {
    auto bad = [](const std::string& m) { return make_error(errc::invalid_argument, "local search: " + m); };
    if (auto s = base_.model.validate(); !s) return s;
    if (configs_.empty()) return bad("no trials");
    if (base_.seq_len < 1 || base_.seq_len > base_.model.max_seq_len) return bad("seq_len out of range");
    if (base_.batch < 1 || base_.eval_batches < 1) return bad("batch and eval_batches must be >= 1");
    if (total_ < 1) return bad("steps must be >= 1");
    if (data_.train.size() < std::size_t(base_.seq_len) + 2 || data_.validation.size() < std::size_t(base_.seq_len) + 2)
      return bad("training or validation tokens shorter than a window");
    for (const auto& t : configs_)
      if (auto s = settings_of(base_, t); !s) return s.err();
    return ok_status();
  }

  // Trains trial t from `from` to `to`; its validation loss at `to` (NaN when a step's loss is not finite).
  result<double> train(int t, std::int64_t from, std::int64_t to) {
    auto& st = states_[std::size_t(t)];
    if (!st) {
      auto made = start(t);
      if (!made) return made.err();
      st.emplace(std::move(*made));
    }
    if (st->step != from)
      return make_error(errc::internal, "local search: trial " + std::to_string(t) + " is at step " +
                                            std::to_string(st->step) + ", asked to go on from " + std::to_string(from));
    trial_result& r = results_[std::size_t(t)];
    for (; st->step < to; ++st->step) {
      const engine::micro_batch mb = st->stream.next();
      auto s = engine::train_step(st->model, st->opt, st->schedule, st->cfg.grad_clip, int(st->step), std::span(&mb, 1));
      if (!s) return s.err();
      ++steps_;
      if (!std::isfinite(s->loss)) {  // diverged: measured no further
        r.steps = st->step + 1;
        r.val_loss = nan;
        r.curve.emplace_back(r.steps, nan);
        return nan;
      }
    }
    auto v = validation_loss(st->model.params());
    if (!v) return v.err();
    r.steps = to;
    r.val_loss = *v;
    r.curve.emplace_back(to, *v);
    return *v;
  }

  search_result finish(int best) {
    search_result out;
    out.best = best;
    out.steps = steps_;
    if (best >= 0) {
      out.best_loss = results_[std::size_t(best)].val_loss;
      out.best_steps = results_[std::size_t(best)].steps;
      const auto p = states_[std::size_t(best)]->model.params();
      out.best_params.assign(p.begin(), p.end());
    }
    out.trials = std::move(results_);
    return out;
  }

  status prepare() {
    if (auto s = check(); !s) return s;
    if (base_.threads > 0) engine::kernels::set_threads(base_.threads);
    auto ev = engine::gpt2::create(base_.model, base_.batch, base_.seq_len);
    if (!ev) return ev.err();
    eval_ = std::make_unique<engine::gpt2>(std::move(*ev));
    results_.resize(configs_.size());
    for (std::size_t i = 0; i < configs_.size(); ++i) results_[i].config = configs_[i];
    return ok_status();
  }

 private:
  result<trial_state> start(int t) {
    auto c = settings_of(base_, configs_[std::size_t(t)]);
    if (!c) return c.err();
    if (c->batch > 1024) return make_error(errc::invalid_argument, "local search: train.batch over 1024");
    auto m = engine::gpt2::create(c->model, c->batch, c->seq_len);
    if (!m) return m.err();
    m->init_random(c->seed);
    engine::adamw opt(m->layout().total, engine::adamw_config{c->beta1, c->beta2, c->eps, c->weight_decay},
                      m->layout().ranges());
    window_stream stream(data_.train, c->batch, c->seq_len, c->seed * 1'000'003u + 1);
    engine::lr_schedule sched{c->lr, c->lr * c->min_lr_ratio, c->warmup, int(total_)};
    return trial_state{*c, std::move(*m), std::move(opt), std::move(stream), sched, 0};
  }

  // Mean loss over eval_batches windows spread evenly over the validation tokens.
  result<double> validation_loss(std::span<const float> params) {
    std::copy(params.begin(), params.end(), eval_->params().begin());
    const int B = base_.batch, T = base_.seq_len;
    std::vector<std::int32_t> in(std::size_t(B) * T), tgt(in.size());
    const std::size_t span = data_.validation.size() - std::size_t(T) - 1;
    const std::size_t windows = std::size_t(base_.eval_batches) * B;
    double sum = 0;
    for (int e = 0; e < base_.eval_batches; ++e) {
      for (int b = 0; b < B; ++b) {
        const std::size_t start = (std::size_t(e) * B + b) * span / windows;
        for (int t = 0; t < T; ++t) {
          in[std::size_t(b) * T + t] = data_.validation[start + t];
          tgt[std::size_t(b) * T + t] = data_.validation[start + t + 1];
        }
      }
      auto l = eval_->forward(in, tgt);
      if (!l) return l.err();
      sum += *l;
    }
    return sum / base_.eval_batches;
  }

  const search_config& base_;
  const search_data& data_;
  const std::vector<hpo::trial_config>& configs_;
  std::int64_t total_;
  std::vector<std::optional<trial_state>> states_;
  std::vector<trial_result> results_;
  std::unique_ptr<engine::gpt2> eval_;  // the base batch shape: one evaluator for every trial
  std::int64_t steps_ = 0;
};

}  // namespace

search_data bytes_split(std::string_view text, double validation_fraction) {
  search_data d;
  const std::size_t held = static_cast<std::size_t>(double(text.size()) * validation_fraction);
  for (std::size_t i = 0; i < text.size(); ++i)
    (i < text.size() - held ? d.train : d.validation).push_back(static_cast<unsigned char>(text[i]));
  return d;
}

result<search_result> run_sweep(const search_config& cfg, const search_data& data,
                                const std::vector<hpo::trial_config>& trials, std::int64_t steps,
                                const std::vector<std::int64_t>& eval_at) {
  harness h(cfg, data, trials, steps);
  if (auto s = h.prepare(); !s) return s.err();
  std::vector<std::int64_t> points;
  for (std::int64_t p : eval_at)
    if (p > 0 && p < steps) points.push_back(p);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  points.push_back(steps);
  int best = -1;
  double best_loss = 0;
  for (int t = 0; t < int(trials.size()); ++t) {
    std::int64_t from = 0;
    double loss = nan;
    for (std::int64_t p : points) {
      auto l = h.train(t, from, p);
      if (!l) return l.err();
      loss = *l;
      if (!std::isfinite(loss)) break;
      from = p;
    }
    if (std::isfinite(loss) && (best < 0 || loss < best_loss)) best = t, best_loss = loss;
  }
  return h.finish(best);
}

result<search_result> run_asha(const search_config& cfg, const search_data& data,
                               const std::vector<hpo::trial_config>& trials, const hpo::asha_options& opt) {
  auto search = hpo::asha::make(opt, trials);
  if (!search) return search.err();
  harness h(cfg, data, trials, opt.max_steps);
  if (auto s = h.prepare(); !s) return s.err();
  auto sim = hpo::run_workers(*search, cfg.workers,
                              [&](int t, std::int64_t from, std::int64_t to) { return h.train(t, from, to); });
  if (!sim) return sim.err();
  search_result out = h.finish(search->best_trial().value_or(-1));
  out.sim = *sim;
  return out;
}

}  // namespace loom::sim
