#include "libs/diloco/site_rounds.hpp"

#include <string>
#include <utility>

namespace loom::diloco {

result<site_rounds> site_rounds::make(fragment_plan plan, std::span<const float> global,
                                      std::vector<std::uint64_t> versions, codec::codec_id uplink,
                                      site_options merge, bool feedback) {
  std::vector<codec::error_feedback> up;
  for (int p = 0; p < plan.fragments(); ++p) up.emplace_back(plan.size(p), uplink);
  auto st = site_state::make(std::move(plan), global, std::move(versions), merge);
  if (!st) return st.err();
  return site_rounds(std::move(*st), std::move(up), feedback);
}

status site_rounds::encode_delta(int p, std::span<const float> local, std::vector<std::byte>& payload) {
  if (p < 0 || p >= plan().fragments())
    return make_error(errc::invalid_argument, "site_rounds: fragment " + std::to_string(p) + " out of range");
  delta_.resize(plan().size(p));
  if (auto s = state_.pseudo_gradient(p, local, delta_); !s) return s;
  if (!feedback_) uplink_[std::size_t(p)].reset();
  return uplink_[std::size_t(p)].encode_into(delta_, payload);
}

status site_rounds::apply(int p, std::uint64_t version, bool is_update, std::span<const float> values,
                          std::span<float> local) {
  if (p < 0 || p >= plan().fragments())
    return make_error(errc::invalid_argument, "site_rounds: fragment " + std::to_string(p) + " out of range");
  if (is_update) return state_.apply_update(p, version, values, local);
  const bool resync = version > state_.version(p) + 1;
  if (auto s = state_.apply_global(p, version, values, local); !s) return s;
  // One version on (an aggregator that restarted no longer holds the update)
  // is the same trajectory: the residual stays valid and is kept.
  if (resync) uplink_[std::size_t(p)].reset();
  return ok_status();
}

}  // namespace loom::diloco
