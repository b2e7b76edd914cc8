#include "libs/diloco/progress/site_progress.hpp"

#include "loom/v1/jobs.pb.h"

namespace loom::diloco {

void to_proto(const site_progress& p, loom::v1::SiteProgress* out) {
  out->set_site(p.site);
  out->set_node(p.node);
  out->set_step(p.step);
  out->set_loss(p.loss);
  out->set_bytes_sent(p.bytes_sent);
  out->set_bytes_received(p.bytes_received);
  out->set_stall_s(p.stall_s);
  out->set_round(p.round);
  out->set_deltas_sent(p.deltas_sent);
  out->set_deltas_deferred(p.deltas_deferred);
  out->set_deltas_late(p.deltas_late);
  out->set_deltas_dropped(p.deltas_dropped);
  out->set_up_bytes_per_s(p.up_bytes_per_s);
  for (const auto& [step, loss] : p.curve) {
    out->add_curve_steps(step);
    out->add_curve_losses(loss);
  }
}

void add_curve_point(std::vector<std::pair<std::uint64_t, double>>& curve, const site_progress& p) {
  if (!curve.empty() && p.step <= curve.back().first) return;
  // The points are a grid of one stride (the first two's distance, doubled at
  // each thinning) and the newest: the newest, short of a stride past the
  // grid's last point, gives way to a newer one.
  const std::size_t n = curve.size();
  if (n >= 3 && curve.back().first - curve[n - 2].first < curve[1].first - curve[0].first)
    curve.back() = {p.step, p.loss};
  else
    curve.emplace_back(p.step, p.loss);
  if (curve.size() < curve_limit) return;
  std::vector<std::pair<std::uint64_t, double>> kept;
  kept.reserve(curve_limit / 2 + 1);
  for (std::size_t i = 0; i + 1 < curve.size(); i += 2) kept.push_back(curve[i]);
  kept.push_back(curve.back());
  curve = std::move(kept);
}

site_progress from_proto(const loom::v1::SiteProgress& p) {
  site_progress r;
  r.site = p.site();
  r.node = p.node();
  r.step = p.step();
  r.loss = p.loss();
  r.bytes_sent = p.bytes_sent();
  r.bytes_received = p.bytes_received();
  r.stall_s = p.stall_s();
  r.round = p.round();
  r.deltas_sent = p.deltas_sent();
  r.deltas_deferred = p.deltas_deferred();
  r.deltas_late = p.deltas_late();
  r.deltas_dropped = p.deltas_dropped();
  r.up_bytes_per_s = p.up_bytes_per_s();
  return r;
}

}  // namespace loom::diloco
