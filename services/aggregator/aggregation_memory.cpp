// aggregation's memory (aggregation.hpp, "memory"): which fragments keep
// θ_p, m_p, e_p and the held update in memory, and reading them back from
// their files. Member functions of aggregation, apart from the rounds.
#include "services/aggregator/aggregation.hpp"

#include "services/aggregator/job_store.hpp"
#include "services/aggregator/limits.hpp"

#include <utility>

namespace loom::aggregator {

status aggregation::take_values(std::uint32_t p, fragment_values v) {
  const double norm = l2_norm(v.params);
  if (auto s = downlink_.load(static_cast<int>(p), std::move(v.residual)); !s) return s;
  if (auto s = rounds_->load(p, std::move(v.params), std::move(v.momentum)); !s) {
    (void)downlink_.unload(static_cast<int>(p));
    return s;
  }
  theta_norm_[p] = norm;
  used_[p] = ++use_clock_;
  return ok_status();
}

bool aggregation::evictable(std::uint32_t p) const {
  // Only what its file holds as it is: not while being saved, nor after a
  // failed save (the file is the version before).
  return files_ && rounds_->optimizer().loaded(static_cast<int>(p)) && !saving_[p] && p < files_->files.size() &&
         files_->files[p].version == rounds_->open_round(p) && !files_->files[p].name.empty();
}

void aggregation::evict(std::uint32_t p) {
  auto [theta, m] = rounds_->unload(p);
  auto e = downlink_.unload(static_cast<int>(p));
  if (theta.capacity() > spare_.params.capacity()) spare_ = {std::move(theta), std::move(m), std::move(e)};
  if (auto& held = last_update_[p]; held && held->payload) {
    held_cache_[p] = held->payload;  // a pull still sending it keeps it alive
    held->payload.reset();
  }
  ++unloads_;
}

void aggregation::make_room(int below, std::optional<std::uint32_t> keep) {
  if (spec_.resident_fragments <= 0 || !files_) return;
  while (rounds_->optimizer().loaded_count() >= below) {
    std::optional<std::uint32_t> lru;
    for (std::uint32_t q = 0; q < used_.size(); ++q)
      if (q != keep && evictable(q) && (!lru || used_[q] < used_[*lru])) lru = q;
    if (!lru) return;
    evict(*lru);
  }
}

status aggregation::ensure_loaded(std::uint32_t p) {
  if (rounds_->optimizer().loaded(static_cast<int>(p))) {
    used_[p] = ++use_clock_;
    return ok_status();
  }
  if (!files_ || p >= files_->files.size())
    return make_error(errc::internal, "aggregation " + spec_.job + ": fragment " + std::to_string(p) +
                                          " is neither in memory nor in a file");
  make_room(spec_.resident_fragments, p);
  auto r = read_fragment(dir(), files_->files[p], rounds_->optimizer().plan(), spec_.job,
                         spec_.outer.momentum != 0, {}, std::exchange(spare_, {}));
  if (!r) return r.err();
  if (auto s = take_values(p, std::move(r->values)); !s) return s;
  if (auto& held = last_update_[p]; held && !held->payload && r->held && r->held->header.version == held->header.version)
    held = std::move(r->held);
  ++loads_;
  return ok_status();
}

void aggregation::save_done(std::uint32_t p) {
  saving_[p] = 0;
  make_room(spec_.resident_fragments + 1);
}

result<std::shared_ptr<const std::string>> aggregation::held_payload(std::uint32_t p) {
  auto& held = *last_update_[p];
  if (held.payload) return held.payload;
  if (auto kept = held_cache_[p].lock()) return kept;
  if (!files_ || p >= files_->files.size())
    return make_error(errc::internal, "aggregation " + spec_.job + ": the held update of fragment " +
                                          std::to_string(p) + " is neither in memory nor in a file");
  auto r = read_fragment(dir(), files_->files[p], rounds_->optimizer().plan(), spec_.job, spec_.outer.momentum != 0,
                         {false, true});
  if (!r) return r.err();
  if (!r->held || r->held->header.version != held.header.version)
    return make_error(errc::corruption, "aggregation " + spec_.job + ": fragment file " + files_->files[p].name +
                                            " does not hold the update of version " +
                                            std::to_string(held.header.version));
  held.header = r->held->header;  // whole: a state read without values kept only its version
  held_cache_[p] = r->held->payload;
  return r->held->payload;
}

result<std::vector<float>> aggregation::full_params() {
  const auto& plan = rounds_->optimizer().plan();
  std::vector<float> out(plan.total());
  for (int p = 0; p < plan.fragments(); ++p) {
    if (rounds_->optimizer().loaded(p)) {
      plan.scatter(p, rounds_->optimizer().params(p), out);
      continue;
    }
    auto r = read_fragment(dir(), files_->files[static_cast<std::size_t>(p)], plan, spec_.job,
                           spec_.outer.momentum != 0, {true, false});
    if (!r) return r.err();
    plan.scatter(p, r->values.params, out);
  }
  return out;
}

}  // namespace loom::aggregator
