#include "libs/diloco/outer_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

namespace loom::diloco {
namespace {

error bad(std::string what) { return make_error(errc::invalid_argument, "outer_optimizer: " + what); }

// One range of the outer step: g = acc/W, the momentum and Nesterov update,
// θ −= U, U out when asked; acc is zeroed as it is read (no second pass).
// The variants are template parameters so that each loop is branch-free and
// vectorises. Shapes: acc, theta, m, u all hold n values.
template <class Acc, bool Momentum, bool Nesterov, bool Out>
void step_loop(Acc* acc, double W, float lr, float mu, float* theta, float* m, float* u, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float g = static_cast<float>(acc[i] / W);
    acc[i] = 0;
    float upd;
    if constexpr (Momentum) {
      m[i] = mu * m[i] + g;
      upd = Nesterov ? lr * (g + mu * m[i]) : lr * m[i];
    } else {
      upd = lr * g;
    }
    theta[i] -= upd;
    if constexpr (Out) u[i] = upd;
  }
}

template <class Acc>
void step_range(Acc* acc, double W, const outer_options& o, float* theta, float* m, float* u, std::size_t n) {
  const float lr = o.lr, mu = o.momentum;
  const bool out = u != nullptr;
  if (m == nullptr) {
    out ? step_loop<Acc, false, false, true>(acc, W, lr, mu, theta, m, u, n)
        : step_loop<Acc, false, false, false>(acc, W, lr, mu, theta, m, u, n);
  } else if (o.nesterov) {
    out ? step_loop<Acc, true, true, true>(acc, W, lr, mu, theta, m, u, n)
        : step_loop<Acc, true, true, false>(acc, W, lr, mu, theta, m, u, n);
  } else {
    out ? step_loop<Acc, true, false, true>(acc, W, lr, mu, theta, m, u, n)
        : step_loop<Acc, true, false, false>(acc, W, lr, mu, theta, m, u, n);
  }
}

}  // namespace

status outer_options::validate() const {
  if (!std::isfinite(lr) || lr <= 0) return bad("lr must be finite and > 0, got " + std::to_string(lr));
  if (!std::isfinite(momentum) || momentum < 0 || momentum >= 1)
    return bad("momentum must be in [0, 1), got " + std::to_string(momentum));
  return ok_status();
}

std::optional<std::size_t> first_non_finite(std::span<const float> v) {
  // A float is NaN or ±Inf exactly when its exponent bits are all ones. OR-ing
  // that test over a block vectorises (integer compares); only a bad block
  // pays for the search that names the index.
  constexpr std::uint32_t exponent = 0x7f800000u;
  constexpr std::size_t block = 4096;
  for (std::size_t start = 0; start < v.size(); start += block) {
    const std::size_t end = std::min(v.size(), start + block);
    std::uint32_t bad_seen = 0;
    for (std::size_t i = start; i < end; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, &v[i], sizeof bits);
      bad_seen |= static_cast<std::uint32_t>((bits & exponent) == exponent);
    }
    if (bad_seen == 0) continue;
    for (std::size_t i = start; i < end; ++i)
      if (!std::isfinite(v[i])) return i;
  }
  return std::nullopt;
}

outer_optimizer::outer_optimizer(fragment_plan plan, std::vector<std::uint64_t> versions, outer_options opts)
    : plan_(std::move(plan)),
      opts_(opts),
      slabs_(plan_.fragments()),
      versions_(std::move(versions)),
      acc_(plan_.fragments()) {}

result<outer_optimizer> outer_optimizer::make(fragment_plan plan, std::vector<float> params, outer_options opts) {
  std::vector<float> momentum(opts.momentum != 0 ? params.size() : 0, 0.0f);
  std::vector<std::uint64_t> versions(plan.fragments(), 0);
  return restore(std::move(plan), std::move(params), std::move(momentum), std::move(versions), opts);
}

result<outer_optimizer> outer_optimizer::unloaded(fragment_plan plan, std::vector<std::uint64_t> versions,
                                                  outer_options opts) {
  if (auto s = opts.validate(); !s.ok()) return s.err();
  if (versions.size() != static_cast<std::size_t>(plan.fragments()))
    return bad(std::to_string(versions.size()) + " versions for " + std::to_string(plan.fragments()) + " fragments");
  return outer_optimizer(std::move(plan), std::move(versions), opts);
}

result<outer_optimizer> outer_optimizer::restore(fragment_plan plan, std::vector<float> params,
                                                 std::vector<float> momentum, std::vector<std::uint64_t> versions,
                                                 outer_options opts) {
  if (params.size() != plan.total())
    return bad("params hold " + std::to_string(params.size()) + " values; the plan has " +
               std::to_string(plan.total()));
  const std::size_t want_m = opts.momentum != 0 ? plan.total() : 0;
  if (momentum.size() != want_m)
    return bad("momentum holds " + std::to_string(momentum.size()) + " values; expected " + std::to_string(want_m));
  auto o = unloaded(std::move(plan), std::move(versions), opts);
  if (!o) return o.err();
  const auto& pl = o->plan_;
  for (int p = 0; p < pl.fragments(); ++p) {
    std::vector<float> theta(pl.size(p)), m(momentum.empty() ? 0 : pl.size(p));
    pl.gather(p, params, theta);
    if (!m.empty()) pl.gather(p, momentum, m);
    if (auto s = o->load(p, std::move(theta), std::move(m)); !s) return s.err();
  }
  return o;
}

status outer_optimizer::load(int p, std::vector<float> theta, std::vector<float> momentum) {
  if (p < 0 || p >= plan_.fragments())
    return bad("fragment " + std::to_string(p) + " out of range [0, " + std::to_string(plan_.fragments()) + ")");
  const std::size_t n = plan_.size(p), want_m = opts_.momentum != 0 ? n : 0;
  if (theta.size() != n || momentum.size() != want_m)
    return bad("fragment " + std::to_string(p) + " loaded with " + std::to_string(theta.size()) + " values and " +
               std::to_string(momentum.size()) + " of momentum; it has " + std::to_string(n) + " and " +
               std::to_string(want_m));
  auto& s = slabs_[std::size_t(p)];
  s.theta = std::move(theta);
  s.m = std::move(momentum);
  s.loaded = true;
  return ok_status();
}

std::pair<std::vector<float>, std::vector<float>> outer_optimizer::unload(int p) {
  auto& s = slabs_[std::size_t(p)];
  s.loaded = false;
  return {std::exchange(s.theta, {}), std::exchange(s.m, {})};
}

int outer_optimizer::loaded_count() const {
  return static_cast<int>(std::count_if(slabs_.begin(), slabs_.end(), [](const slab& s) { return s.loaded; }));
}

std::vector<float> outer_optimizer::full(std::vector<float> slab::*part) const {
  std::vector<float> out(plan_.total());
  for (int p = 0; p < plan_.fragments(); ++p) plan_.scatter(p, slabs_[std::size_t(p)].*part, out);
  return out;
}

std::vector<float> outer_optimizer::full_params() const { return full(&slab::theta); }
std::vector<float> outer_optimizer::full_momentum() const {
  return opts_.momentum != 0 ? full(&slab::m) : std::vector<float>();
}

status outer_optimizer::accumulate(int p, double weight, std::span<const float> delta) {
  if (p < 0 || p >= plan_.fragments())
    return bad("fragment " + std::to_string(p) + " out of range [0, " + std::to_string(plan_.fragments()) + ")");
  if (delta.size() != plan_.size(p))
    return bad("delta for fragment " + std::to_string(p) + " has " + std::to_string(delta.size()) +
               " values; the fragment has " + std::to_string(plan_.size(p)));
  if (!std::isfinite(weight) || weight <= 0) return bad("weight must be finite and > 0");
  auto& a = acc_[p];
  const std::size_t n = delta.size();
  if (a.deltas == 0 && a.f64.empty() && a.f32.empty()) {  // the first delta: the spare's zeroed pages
    a.f64 = std::move(spare_.f64);
    a.f32 = std::move(spare_.f32);
    spare_ = accumulator{};
  }
  if (opts_.precision == accumulate_in::fp64) {
    if (a.f64.size() != n) a.f64.assign(n, 0.0);
    double* acc = a.f64.data();
    for (std::size_t i = 0; i < n; ++i) acc[i] += weight * static_cast<double>(delta[i]);
  } else {
    if (a.f32.size() != n) a.f32.assign(n, 0.0f);
    float* acc = a.f32.data();
    const float w = static_cast<float>(weight);
    for (std::size_t i = 0; i < n; ++i) acc[i] += w * delta[i];
  }
  a.weight += weight;
  ++a.deltas;
  return ok_status();
}

result<step_report> outer_optimizer::step(int p, std::span<float> update_out) {
  if (p < 0 || p >= plan_.fragments())
    return bad("fragment " + std::to_string(p) + " out of range [0, " + std::to_string(plan_.fragments()) + ")");
  auto& a = acc_[p];
  const int deltas = a.deltas;
  if (deltas == 0)
    return make_error(errc::conflict, "outer_optimizer: no delta accumulated for fragment " + std::to_string(p));
  if (!update_out.empty() && update_out.size() != plan_.size(p))
    return bad("update_out has " + std::to_string(update_out.size()) + " values; fragment " + std::to_string(p) +
               " has " + std::to_string(plan_.size(p)));
  auto& sl = slabs_[std::size_t(p)];
  if (!sl.loaded)
    return make_error(errc::conflict, "outer_optimizer: fragment " + std::to_string(p) + " is not loaded");
  const double W = a.weight;
  const std::size_t n = plan_.size(p);
  float* m = sl.m.empty() ? nullptr : sl.m.data();
  float* u = update_out.empty() ? nullptr : update_out.data();
  if (opts_.precision == accumulate_in::fp64)
    step_range(a.f64.data(), W, opts_, sl.theta.data(), m, u, n);
  else
    step_range(a.f32.data(), W, opts_, sl.theta.data(), m, u, n);
  a.weight = 0;  // step_range zeroed the sums as it read them: the spare for the next fragment
  a.deltas = 0;
  spare_ = std::move(a);
  a = accumulator{};
  return step_report{++versions_[p], W, deltas};
}

status outer_optimizer::correct(int p, std::span<const float> add) {
  if (p < 0 || p >= plan_.fragments())
    return make_error(errc::invalid_argument, "correct: fragment " + std::to_string(p) + " out of range");
  if (add.size() != plan_.size(p))
    return make_error(errc::invalid_argument, "correct: " + std::to_string(add.size()) + " values for fragment " +
                                                  std::to_string(p) + " of " + std::to_string(plan_.size(p)));
  if (auto bad = first_non_finite(add))
    return make_error(errc::invalid_argument, "correct: value " + std::to_string(*bad) + " is not finite");
  auto& sl = slabs_[std::size_t(p)];
  if (!sl.loaded) return make_error(errc::conflict, "correct: fragment " + std::to_string(p) + " is not loaded");
  for (std::size_t i = 0; i < add.size(); ++i) sl.theta[i] += add[i];
  return ok_status();
}

void outer_optimizer::discard(int p) {
  acc_[p] = accumulator{};
}

}  // namespace loom::diloco
