#include "libs/diloco/downlink.hpp"

#include <string>

namespace loom::diloco {

downlink::downlink(const fragment_plan& plan, codec::codec_id c, bool feedback) : codec_(c), feedback_(feedback) {
  for (int p = 0; p < plan.fragments(); ++p) {
    ef_.emplace_back(plan.size(p), c);
    sizes_.push_back(plan.size(p));
  }
}

downlink downlink::unloaded(const fragment_plan& plan, codec::codec_id c, bool feedback) {
  downlink d(c, feedback);
  for (int p = 0; p < plan.fragments(); ++p) {
    d.ef_.emplace_back(0, c);
    d.sizes_.push_back(plan.size(p));
  }
  return d;
}

std::vector<float> downlink::unload(int p) { return ef_[std::size_t(p)].release(); }

status downlink::load(int p, std::vector<float> residual) {
  if (p < 0 || std::size_t(p) >= ef_.size())
    return make_error(errc::invalid_argument, "downlink: fragment " + std::to_string(p) + " out of range");
  if (residual.size() != sizes_[std::size_t(p)])
    return make_error(errc::invalid_argument, "downlink: fragment " + std::to_string(p) + " has " +
                                                  std::to_string(sizes_[std::size_t(p)]) + " values, the residual " +
                                                  std::to_string(residual.size()));
  if (auto s = ef_[std::size_t(p)].adopt(std::move(residual)); !s)
    return make_error(s.code(), "downlink: fragment " + std::to_string(p) + ": " + s.err().message);
  return ok_status();
}

result<downlink> downlink::restore(const fragment_plan& plan, codec::codec_id c, std::span<const float> residual) {
  if (residual.size() != plan.total())
    return make_error(errc::corruption, "the downlink residual has " + std::to_string(residual.size()) +
                                            " values, the plan " + std::to_string(plan.total()));
  downlink d(plan, c);
  std::size_t at = 0;
  for (auto& e : d.ef_) {
    if (auto s = e.restore(residual.subspan(at, e.size())); !s) return s.err();
    at += e.size();
  }
  return d;
}

result<codec::codec_id> downlink::send(int p, std::span<const float> update, std::vector<std::byte>& payload,
                                       std::span<float> correction) {
  if (p < 0 || std::size_t(p) >= ef_.size())
    return make_error(errc::invalid_argument, "downlink: fragment " + std::to_string(p) + " out of range");
  auto& e = ef_[std::size_t(p)];
  if (!loaded(p)) return make_error(errc::conflict, "downlink: fragment " + std::to_string(p) + " is not loaded");
  if (update.size() != e.size() || correction.size() != e.size())
    return make_error(errc::invalid_argument, "downlink: fragment " + std::to_string(p) + " has " +
                                                  std::to_string(e.size()) + " values, the update " +
                                                  std::to_string(update.size()) + " and the correction " +
                                                  std::to_string(correction.size()));
  if (const std::size_t bad = codec::first_non_finite(update); bad < update.size())
    return make_error(errc::invalid_argument, "downlink: fragment " + std::to_string(p) + "'s update value at index " +
                                                  std::to_string(bad) + " is not finite");
  if (!feedback_) e.reset();
  codec::codec_id used = codec_;
  if (!e.encode_into(update, payload)) {  // a value the codec cannot hold (e restored): exact this round
    used = codec::codec_id::fp32;
    e.set_codec(used);
    auto exact = e.encode_into(update, payload);
    e.set_codec(codec_);
    if (!exact) return exact.err();
  }
  sent_.assign(update.size(), 0.0f);
  if (auto s = codec::decode(payload, sent_); !s)
    return make_error(errc::internal, "downlink cannot decode its own payload: " + s.err().message);
  for (std::size_t i = 0; i < update.size(); ++i) correction[i] = update[i] - sent_[i];
  return used;
}

std::vector<float> downlink::residual() const {
  std::vector<float> out;
  for (const auto& e : ef_) out.insert(out.end(), e.residual().begin(), e.residual().end());
  return out;
}

}  // namespace loom::diloco
