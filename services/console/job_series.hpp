// job_series: the loss / throughput curve of each job as the console saw it.
// Every GetJob reply that passes through the console (a job page's request,
// a live stream) adds a point per running stage whose step moved, so the
// curve grows while anyone watches and a page opened later starts from what
// was seen before. A caller is shown a job's points only after its own
// GetJob for that job succeeded (the scheduler decides who may see it).
// Bounded: 4096 points per job (older halves thinned), 512 jobs (least
// recently updated dropped). Thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace loom::console {

struct series_point {
  std::string stage;
  std::uint64_t step = 0;
  double loss = 0, tokens_per_s = 0;
  std::uint64_t unix_ms = 0;
};

class job_series {
 public:
  static constexpr std::size_t max_points = 4096, max_jobs = 512;

  // A stage's report: added when `step` differs from that stage's last point.
  // true when a point was added.
  bool add(const std::string& job, const series_point& p);
  // The job's points from index `from` on (the whole curve for 0), and the
  // index the next call should start from.
  std::vector<series_point> since(const std::string& job, std::size_t from, std::size_t* next) const;

 private:
  struct curve {
    std::vector<series_point> points;
    std::size_t dropped = 0;  // points thinned away: indices stay stable for since()
    std::uint64_t touched = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, curve> jobs_;
  std::uint64_t clock_ = 0;
};

}  // namespace loom::console
