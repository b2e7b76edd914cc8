#include "libs/hpo/asha.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::hpo {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

error bad(const std::string& why) { return make_error(errc::invalid_argument, "asha: " + why); }

// (loss, trial) order: the lower loss first, ties to the lower trial id.
bool better(double la, int ta, double lb, int tb) { return la < lb || (la == lb && ta < tb); }

}  // namespace

status asha_options::validate() const {
  if (min_steps < 1) return bad("hpo.min_steps must be at least 1");
  if (max_steps < min_steps) return bad("hpo.max_steps must be at least hpo.min_steps");
  if (eta < 2) return bad("hpo.eta must be at least 2");
  return ok_status();
}

result<asha> asha::make(const asha_options& opt, std::vector<trial_config> trials) {
  if (auto st = opt.validate(); !st) return st.err();
  if (trials.empty()) return bad("no trials");
  asha a;
  a.opt_ = opt;
  int K = 0;  // the largest K with r · eta^K <= R
  for (double reach = double(opt.min_steps) * opt.eta; reach <= double(opt.max_steps); reach *= opt.eta) ++K;
  for (int k = 0; k <= K; ++k)
    a.rungs_.push_back(std::llround(double(opt.max_steps) / std::pow(double(opt.eta), K - k)));
  a.trials_ = std::move(trials);
  a.state_.resize(a.trials_.size());
  for (trial_state& s : a.state_) s.promoted_from.assign(a.rungs_.size(), false);
  a.reached_.resize(a.rungs_.size());
  return a;
}

void asha::grant(int t, int to_rung) {
  trial_state& s = state_[std::size_t(t)];
  if (to_rung > 0) s.promoted_from[std::size_t(to_rung - 1)] = true;
  s.running = true;
  s.started = true;
  granted_ += rungs_[std::size_t(to_rung)] - s.target;
  s.target = rungs_[std::size_t(to_rung)];
}

// Whether trial t, which reached rung k, is among the best floor(n_k / eta) there.
bool asha::promotable(int t, int k) const {
  const trial_state& s = state_[std::size_t(t)];
  if (k + 1 >= int(rungs_.size()) || s.failed || s.promoted_from[std::size_t(k)] || s.rung != k) return false;
  const double mine = loss_of(t);
  if (!std::isfinite(mine)) return false;
  const auto& rung = reached_[std::size_t(k)];
  const std::size_t quota = rung.size() / std::size_t(opt_.eta);
  std::size_t ahead = 0;
  for (const record& r : rung) ahead += better(r.loss, r.trial, mine, t);
  return ahead < quota;
}

std::optional<int> asha::best_at(int k, bool only_promotable) const {
  std::optional<int> best;
  double best_loss = inf;
  for (const record& r : reached_[std::size_t(k)]) {
    if (!std::isfinite(r.loss)) continue;
    if (only_promotable && (state_[std::size_t(r.trial)].running || !promotable(r.trial, k))) continue;
    if (!only_promotable && state_[std::size_t(r.trial)].promoted_from[std::size_t(k)]) continue;
    if (!best || better(r.loss, r.trial, best_loss, *best)) best = r.trial, best_loss = r.loss;
  }
  return best;
}

suggestion asha::suggest() {
  const int K = int(rungs_.size()) - 1;
  for (int k = K - 1; k >= 0; --k)
    if (auto t = best_at(k, true)) {
      grant(*t, k + 1);
      return {suggestion::kind::resume, *t, rungs_[std::size_t(k)], rungs_[std::size_t(k + 1)]};
    }
  if (next_new_ < int(trials_.size())) {
    const int t = next_new_++;
    grant(t, 0);
    return {suggestion::kind::start, t, 0, rungs_[0]};
  }
  if (running() > 0) return {suggestion::kind::wait};
  const bool someone_finished =
      std::any_of(reached_.back().begin(), reached_.back().end(), [](const record& r) { return std::isfinite(r.loss); });
  if (opt_.finish_best && !someone_finished)
    for (int k = K - 1; k >= 0; --k)
      if (auto t = best_at(k, false); t && !state_[std::size_t(*t)].failed) {
        grant(*t, k + 1);
        return {suggestion::kind::resume, *t, rungs_[std::size_t(k)], rungs_[std::size_t(k + 1)]};
      }
  return {suggestion::kind::done};
}

bool asha::done() const {
  asha copy = *this;  // a few trials and records: cheap, and suggest() stays the one rule
  return copy.suggest().what == suggestion::kind::done;
}

status asha::report(int t, std::int64_t step, double val_loss) {
  if (t < 0 || t >= int(trials_.size())) return bad("report for unknown trial " + std::to_string(t));
  trial_state& s = state_[std::size_t(t)];
  if (!s.running) return bad("report for trial " + std::to_string(t) + ", which is not running");
  if (step <= s.step || step > s.target)
    return bad("trial " + std::to_string(t) + " reported step " + std::to_string(step) + ", outside (" +
               std::to_string(s.step) + ", " + std::to_string(s.target) + "]");
  s.step = step;
  const bool boundary = step == s.target;
  if (!std::isfinite(val_loss)) {  // diverged: counts as the worst at its rung, never resumed
    s.failed = true;
    val_loss = inf;
  } else if (!boundary) {
    s.last = action::continue_training;
    return ok_status();
  }
  const int k = int(std::find(rungs_.begin(), rungs_.end(), s.target) - rungs_.begin());
  reached_[std::size_t(k)].push_back({t, val_loss});
  s.rung = k;
  if (s.failed) {
    s.running = false;
    s.last = action::stop;
  } else if (k + 1 == int(rungs_.size())) {
    s.running = false;
    s.last = action::complete;
  } else if (promotable(t, k)) {
    grant(t, k + 1);
    s.last = action::promote;
  } else {
    s.running = false;
    s.last = action::stop;
  }
  return ok_status();
}

action asha::next_action(int t) const {
  if (t < 0 || t >= int(trials_.size())) return action::stop;
  return state_[std::size_t(t)].last;
}

double asha::loss_of(int t) const {
  const trial_state& s = state_[std::size_t(t)];
  if (s.rung < 0) return inf;
  for (const record& r : reached_[std::size_t(s.rung)])
    if (r.trial == t) return r.loss;
  return inf;
}

int asha::rung_of(int t) const { return state_[std::size_t(t)].rung; }

bool asha::retired(int t) const {
  if (t < 0 || t >= int(trials_.size())) return false;
  const trial_state& s = state_[std::size_t(t)];
  if (s.failed) return true;
  const int K = int(rungs_.size()) - 1;
  if (!s.started || s.running || s.rung < 0 || s.rung >= K) return false;
  if (best_trial() == t) return false;  // the result (without finish_best: at a rung below R)
  const bool someone_finished =
      std::any_of(reached_.back().begin(), reached_.back().end(), [](const record& r) { return std::isfinite(r.loss); });
  if (opt_.finish_best && !someone_finished) return false;
  const int k = s.rung;
  const double mine = loss_of(t);
  std::size_t ahead = 0;
  for (const record& r : reached_[std::size_t(k)]) ahead += better(r.loss, r.trial, mine, t);
  std::size_t may_arrive = 0;
  for (const trial_state& u : state_) may_arrive += !u.failed && u.rung < k;
  return ahead >= (reached_[std::size_t(k)].size() + may_arrive) / std::size_t(opt_.eta);
}

std::optional<int> asha::best_trial() const {
  for (int k = int(rungs_.size()) - 1; k >= 0; --k) {
    std::optional<int> best;
    double best_loss = inf;
    for (const record& r : reached_[std::size_t(k)])  // a trial that diverged later is no result, whatever it scored here
      if (std::isfinite(r.loss) && !state_[std::size_t(r.trial)].failed &&
          (!best || better(r.loss, r.trial, best_loss, *best)))
        best = r.trial, best_loss = r.loss;
    if (best) return best;
  }
  return std::nullopt;
}

int asha::running() const {
  return int(std::count_if(state_.begin(), state_.end(), [](const trial_state& s) { return s.running; }));
}

}  // namespace loom::hpo
