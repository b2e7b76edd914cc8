// site_progress: one site of a diloco stage as its trainer reports it — its
// own step and loss, what its sync sent, received and waited, the outer
// round, its measured uplink. The one form of it in the code: the trainer's
// sync fills it (site_sync::progress), its work board holds it, the poll
// carries it (loom.v1.SiteProgress, mapped here and nowhere else), the
// scheduler keeps the last one per site for `loom job watch` (and each
// site's loss curve, for `loom report`) and takes the uplink for the site's
// link. A value type.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::v1 {
class SiteProgress;
}

namespace loom::diloco {

struct site_progress {
  std::string site;  // "site-<rank>" or the edge site's name; "" = not a diloco stage
  std::string node;  // the trainer reporting it (filled in by the scheduler)
  std::uint64_t step = 0;
  double loss = 0;
  std::uint64_t bytes_sent = 0;      // delta payload bytes up
  std::uint64_t bytes_received = 0;  // update and parameter payload bytes down
  double stall_s = 0;                // the training thread waiting on the sync (normally ~0)
  std::uint64_t round = 0;           // fragment 0's merged version
  std::uint64_t deltas_sent = 0, deltas_deferred = 0, deltas_late = 0, deltas_dropped = 0;
  double up_bytes_per_s = 0;         // the uplink as measured (0: not yet)
  // The scheduler's: the site's (step, loss) so far, at most curve_limit points
  // (add_curve_point). to_proto writes it; from_proto never reads it (a
  // trainer's poll does not get to write the curve).
  std::vector<std::pair<std::uint64_t, double>> curve;
};

inline constexpr std::size_t curve_limit = 512;

// Adds (p.step, p.loss) to `curve` when p.step is past its last point. The
// curve is an even grid plus the newest point; at curve_limit every other
// point goes (the first and the newest stay) and the grid's stride doubles,
// so it spans the whole stage evenly in a bounded size.
void add_curve_point(std::vector<std::pair<std::uint64_t, double>>& curve, const site_progress& p);

void to_proto(const site_progress& p, loom::v1::SiteProgress* out);
site_progress from_proto(const loom::v1::SiteProgress& p);

}  // namespace loom::diloco
