#include "libs/diloco/site_state.hpp"

#include <string>
#include <utility>

namespace loom::diloco {
namespace {

error bad(std::string what) { return make_error(errc::invalid_argument, "site_state: " + what); }

}  // namespace

site_state::site_state(fragment_plan plan, std::vector<float> anchor, std::vector<std::uint64_t> versions,
                       site_options opts)
    : plan_(std::move(plan)),
      opts_(opts),
      anchor_(std::move(anchor)),
      versions_(std::move(versions)),
      sent_(plan_.fragments()) {}

result<site_state> site_state::make(fragment_plan plan, std::span<const float> global,
                                    std::vector<std::uint64_t> versions, site_options opts) {
  if (global.size() != plan.total())
    return bad("global params hold " + std::to_string(global.size()) + " values; the plan has " +
               std::to_string(plan.total()));
  if (versions.size() != static_cast<std::size_t>(plan.fragments()))
    return bad(std::to_string(versions.size()) + " versions for " + std::to_string(plan.fragments()) + " fragments");
  if (!(opts.mix_alpha >= 0 && opts.mix_alpha <= 1)) return bad("mix_alpha must be in [0, 1]");
  return site_state(std::move(plan), std::vector<float>(global.begin(), global.end()), std::move(versions), opts);
}

status site_state::check(int p, std::size_t part, std::size_t full) const {
  if (p < 0 || p >= plan_.fragments())
    return bad("fragment " + std::to_string(p) + " out of range [0, " + std::to_string(plan_.fragments()) + ")");
  if (part != plan_.size(p))
    return bad("fragment " + std::to_string(p) + " has " + std::to_string(plan_.size(p)) + " values, got " +
               std::to_string(part));
  if (full != plan_.total())
    return bad("local params hold " + std::to_string(full) + " values; the plan has " + std::to_string(plan_.total()));
  return ok_status();
}

status site_state::pseudo_gradient(int p, std::span<const float> local, std::span<float> delta_out) {
  if (auto s = check(p, delta_out.size(), local.size()); !s.ok()) return s;
  auto& sent = sent_[p];
  sent.resize(plan_.size(p));
  std::size_t k = 0;
  for (const auto& r : plan_.ranges(p)) {
    const float* a = anchor_.data() + r.offset;
    const float* x = local.data() + r.offset;
    for (std::size_t i = 0; i < r.count; ++i, ++k) {
      delta_out[k] = a[i] - x[i];
      sent[k] = x[i];
    }
  }
  return ok_status();
}

void keep_progress(const fragment_plan& plan, int p, std::span<const float> global_p, std::span<const float> ref_p,
                   std::span<float> local) {
  std::size_t k = 0;
  for (const auto& r : plan.ranges(p)) {
    float* x = local.data() + r.offset;
    for (std::size_t i = 0; i < r.count; ++i, ++k) x[i] = global_p[k] + (x[i] - ref_p[k]);
  }
}

void site_state::merge(int p, std::span<const float> global_p, std::span<float> local) {
  if (opts_.rule == merge_rule::keep_progress) {
    if (in_flight(p)) {
      keep_progress(plan_, p, global_p, sent_[p], local);
    } else {  // nothing in flight: the reference is the anchor
      ref_.resize(plan_.size(p));
      plan_.gather(p, anchor_, ref_);
      keep_progress(plan_, p, global_p, ref_, local);
    }
  }
  const float alpha = opts_.mix_alpha;
  std::size_t k = 0;
  for (const auto& r : plan_.ranges(p)) {
    float* a = anchor_.data() + r.offset;
    float* x = local.data() + r.offset;
    for (std::size_t i = 0; i < r.count; ++i, ++k) {
      const float g = global_p[k];
      if (opts_.rule == merge_rule::replace) x[i] = g;
      if (opts_.rule == merge_rule::mix) x[i] = alpha * x[i] + (1 - alpha) * g;
      a[i] = g;
    }
  }
  sent_[p].clear();  // keeps its capacity for the next sync
}

status site_state::apply_global(int p, std::uint64_t version, std::span<const float> global_p,
                                std::span<float> local) {
  if (auto s = check(p, global_p.size(), local.size()); !s.ok()) return s;
  if (version <= versions_[p])
    return make_error(errc::conflict, "site_state: fragment " + std::to_string(p) + " is at version " +
                                          std::to_string(versions_[p]) + "; global version " +
                                          std::to_string(version) + " is not newer");
  merge(p, global_p, local);
  versions_[p] = version;
  return ok_status();
}

status site_state::apply_update(int p, std::uint64_t version, std::span<const float> update_p,
                                std::span<float> local) {
  if (auto s = check(p, update_p.size(), local.size()); !s.ok()) return s;
  if (version != versions_[p] + 1)
    return make_error(errc::conflict, "site_state: fragment " + std::to_string(p) + " is at version " +
                                          std::to_string(versions_[p]) + "; an update to version " +
                                          std::to_string(version) + " needs the parameters, not an update");
  global_.resize(update_p.size());
  std::size_t k = 0;
  for (const auto& r : plan_.ranges(p))
    for (std::size_t i = 0; i < r.count; ++i, ++k) global_[k] = anchor_[r.offset + i] - update_p[k];
  merge(p, global_, local);
  versions_[p] = version;
  return ok_status();
}

}  // namespace loom::diloco
