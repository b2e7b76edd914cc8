#include "sim/diloco/cloud.hpp"

#include "libs/crypto/hash.hpp"

#include <algorithm>
#include <utility>
#include <variant>

namespace loom::sim {
namespace {

std::string_view chars(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

std::span<const std::byte> bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

result<diloco_cloud> diloco_cloud::make(aggregator::aggregation_spec spec, std::span<const float> theta0, int sites,
                                        cloud_site_options site) {
  if (sites < 1) return make_error(errc::invalid_argument, "diloco_cloud: no sites");
  auto agg = aggregator::aggregation::create(std::move(spec), std::vector<float>(theta0.begin(), theta0.end()), "",
                                             aggregator::nanos{0});
  if (!agg) return agg.err();
  std::vector<diloco::site_rounds> members;
  for (int s = 0; s < sites; ++s) {
    auto joined = (*agg)->join(name(s), "key-" + name(s));
    if (!joined) return joined.err();
    auto r = diloco::site_rounds::make((*agg)->rounds().optimizer().plan(), theta0, joined->versions, site.uplink, {},
                                       site.error_feedback);
    if (!r) return r.err();
    members.push_back(std::move(*r));
  }
  return diloco_cloud(std::move(*agg), std::move(members));
}

result<std::size_t> diloco_cloud::send(int s, int p, std::span<const float> local, std::uint64_t tokens) {
  auto& site = sites_[std::size_t(s)];
  if (auto st = site.encode_delta(p, local, payload_); !st) return st.err();
  aggregator::delta_header h;
  h.job = agg_->spec().job;
  h.meta = {name(s), site.version(p), static_cast<std::uint32_t>(p), site.version(p), site.last_delta().size(), tokens};
  h.codec = std::string(codec::to_string(site.uplink(p)));
  h.payload_bytes = payload_.size();
  h.payload_sha256 = std::string(crypto::as_view(crypto::sha256(chars(payload_))));
  auto out = agg_->submit(h, chars(payload_), name(s), now_);
  if (auto* no = std::get_if<aggregator::refusal>(&out))
    return make_error(no->err.code, name(s) + "'s delta refused (" + no->reason + "): " + no->err.message);
  const auto& done = std::get<aggregator::delta_outcome>(out);
  if (done.closed && !done.closed->saved) return done.closed->saved.err();
  return payload_.size();
}

result<bool> diloco_cloud::close_late(int p) {
  if (agg_->rounds().optimizer().pending_deltas(p) == 0) return false;
  now_ = std::max(now_, agg_->rounds().deadline(static_cast<std::uint32_t>(p)) + aggregator::nanos{1});
  bool closed = false;
  for (const auto& r : agg_->tick(now_)) {
    if (!r.saved) return r.saved.err();
    closed = closed || r.round.fragment == static_cast<std::uint32_t>(p);
  }
  return closed;
}

result<std::size_t> diloco_cloud::pull(int s, int p, std::span<float> local) {
  auto& site = sites_[std::size_t(s)];
  auto got = agg_->pull(name(s), static_cast<std::uint32_t>(p), site.version(p), false);
  if (!got) return got.err();
  if (!got->has_update) return std::size_t{0};
  values_.resize(got->header.elements);
  if (auto st = codec::decode(bytes(*got->payload), values_); !st) return st.err();
  const bool update = got->header.kind == aggregator::update_kind::outer_update;
  if (auto st = site.apply(p, got->header.version, update, values_, local); !st) return st.err();
  return got->payload->size();
}

}  // namespace loom::sim
