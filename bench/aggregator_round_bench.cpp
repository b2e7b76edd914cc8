// aggregator_round_bench: one DiLoCo round through the aggregator's own round
// logic (services/aggregator `aggregation`, in process: the payload checks,
// decode, the norm bound, job_rounds' accumulate and outer step, the
// downlink's error feedback, the save of the job's state) for a GPT-2 model in
// 4 fragments with 4 sites sending int8 deltas (N(0, 1e-3), fixed seed). The
// wire is left out: what a round costs the aggregator itself, and what it must
// hold, is what bounds the model and the number of sites (docs/scale.md).
// Each fragment's round: every site's delta submitted (the last closes it by
// quorum: outer step, downlink), its save, then one site's pull of the update.
//   storage=memory  no state file;  storage=disk  after every outer step the
//   fragment's file and the manifest written as the service does (deferred,
//   as the engine does, then run at once here on this thread; write, fsync,
//   rename; in a temp dir).
//   resident=all    every fragment's θ_p, m_p, e_p in memory; resident=1
//   one (the service's default): each close reads its fragment back from
//   its file first (inside close_ms), and the one before leaves memory.
// Each case runs in a child process of its own, so its peak is its own.
//   aggregator_round_bench [d12|350m] [bounded]   (default d12 = GPT-2 124M;
//                                                  bounded: the resident=1 case alone)
// Last lines, one per case:
//   case=round_<model> storage=<memory|disk> resident=<all|1> values=… submit_ms_per_delta=…
//        close_ms_per_fragment=… save_ms_per_fragment=… round_s=… bytes_up_per_site=…
//        bytes_down_per_site=… fragment_loads=… peak_rss_mb=… round_peak_rss_mb=…
// submit: a delta that does not close its round; close: the one that does
// (its submit, the outer step, the downlink: what the engine's lock is held
// for); save: the fragment's file and the manifest (off the lock in the
// service); round_s: the aggregator's time for the whole round, saves
// included (the sites' encoding left out); peak_rss_mb: the case's peak,
// the job's creation included (its initial θ is one whole vector);
// round_peak_rss_mb: the peak during the round alone (VmHWM reset after the
// creation), the bench's own delta and payload buffers included.
#include "libs/crypto/hash.hpp"
#include "libs/files/temp_dir.hpp"
#include "services/aggregator/aggregation.hpp"
#include "services/aggregator/job_store.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <variant>
#include <vector>

using namespace loom;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr int sites = 4;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double peak_rss_mb() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// The peak resident set since the last reset_peak(), from /proc (MiB).
double hwm_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

struct figures {
  double submit_ms = 0, close_ms = 0, save_ms = 0, round_s = 0, round_peak_mb = 0;
  std::uint64_t up = 0, down = 0, values = 0, loads = 0;
};

int run(const std::string& name, const model::gpt2_config& cfg, bool disk, int resident, figures& f) {
  files::temp_dir dir("agg-bench");
  aggregator::aggregation_spec spec;
  spec.job = "bench";
  spec.gpt2 = cfg;
  spec.fragments = 4;
  spec.sync_every = 100;
  spec.codec = codec::codec_id::int8;
  spec.resident_fragments = resident;
  auto plan = aggregator::make_plan(spec);
  if (!plan) {
    std::fprintf(stderr, "aggregator_round_bench: %s\n", plan.err().to_string().c_str());
    return 1;
  }
  f.values = plan->total();
  auto agg = aggregator::aggregation::create(spec, aggregator::seeded_params(plan->total(), 7),
                                             disk ? dir.path() + "/state.bin" : "", aggregator::nanos{0});
  if (!agg) {
    std::fprintf(stderr, "aggregator_round_bench: %s\n", agg.err().to_string().c_str());
    return 1;
  }
  (*agg)->defer_saves();
  reset_peak();
  for (int s = 0; s < sites; ++s) (void)(*agg)->join("site-" + std::to_string(s), "key-" + std::to_string(s));
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  double submit_ms = 0, close_ms = 0, save_ms = 0, pull_ms = 0;
  for (int p = 0; p < plan->fragments(); ++p) {
    std::vector<float> delta(plan->size(p));
    for (int s = 0; s < sites; ++s) {
      for (auto& x : delta) x = normal(rng);
      auto q = codec::encode(codec::codec_id::int8, delta).value();
      const std::string payload(reinterpret_cast<const char*>(q.data()), q.size());
      aggregator::delta_header h;
      h.job = spec.job;
      h.meta = {"site-" + std::to_string(s), 0, static_cast<std::uint32_t>(p), 0, delta.size(), 1000};
      h.codec = "int8";
      h.payload_bytes = payload.size();
      h.payload_sha256 = std::string(crypto::as_view(crypto::sha256(payload)));
      const auto t0 = clock_type::now();
      auto out = (*agg)->submit(h, payload, h.meta.site, aggregator::nanos{1});
      const double took = ms_since(t0);
      if (auto* no = std::get_if<aggregator::refusal>(&out)) {
        std::fprintf(stderr, "aggregator_round_bench: refused (%s): %s\n", no->reason.c_str(), no->err.message.c_str());
        return 1;
      }
      const auto& done = std::get<aggregator::delta_outcome>(out);
      if (done.closed) {
        close_ms += took;  // the closing delta: its own submit, the outer step, the downlink
        if (done.closed->save) {
          const auto t_save = clock_type::now();
          const auto saved = aggregator::run_save(*done.closed->save);
          save_ms += ms_since(t_save);
          if (!saved) {
            std::fprintf(stderr, "aggregator_round_bench: save: %s\n", saved.err().message.c_str());
            return 1;
          }
          (*agg)->save_done(static_cast<std::uint32_t>(p));
        }
      } else {
        submit_ms += took;
      }
      f.up += payload.size();  // every site's: divided by the sites below
    }
    const auto t_pull = clock_type::now();
    auto pulled = (*agg)->pull("site-0", static_cast<std::uint32_t>(p), 0, false);
    pull_ms += ms_since(t_pull);
    if (!pulled || !pulled->has_update) {
      std::fprintf(stderr, "aggregator_round_bench: no update for fragment %d\n", p);
      return 1;
    }
    f.down += pulled->payload->size();
  }
  f.round_s = (submit_ms + close_ms + save_ms + pull_ms) / 1e3;  // the aggregator's time, not the sites' encoding
  f.submit_ms = submit_ms / (plan->fragments() * (sites - 1));
  f.close_ms = close_ms / plan->fragments();
  f.save_ms = save_ms / plan->fragments();
  f.up /= sites;
  f.loads = (*agg)->fragment_loads();
  f.round_peak_mb = hwm_mb();
  std::printf("%s storage=%s resident=%d: %.1f s of the aggregator's time for a round of %d fragments x %d sites\n",
              name.c_str(), disk ? "disk" : "memory", resident, f.round_s, plan->fragments(), sites);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "d12";
  const bool only_bounded = argc > 2 && std::string(argv[2]) == "bounded";
  model::gpt2_config cfg{12, 12, 768, 1024, 50257, 50304};   // GPT-2 124M
  if (which == "350m") cfg = {24, 16, 1024, 1024, 50257, 50304};  // GPT-2 medium
  else if (which != "d12") {
    std::fprintf(stderr, "aggregator_round_bench: want d12 or 350m, not %s\n", which.c_str());
    return 2;
  }
  struct which_case {
    bool disk;
    int resident;
  };
  std::vector<std::string> lines;
  for (const which_case c : {which_case{false, 0}, which_case{true, 0}, which_case{true, 1}}) {
    if (only_bounded && c.resident != 1) continue;
    int fds[2];
    if (::pipe(fds) != 0) return 1;
    std::fflush(stdout);
    const pid_t child = ::fork();
    if (child == 0) {  // the case, alone in its process: its peak is its own
      ::close(fds[0]);
      figures f;
      if (int rc = run(which, cfg, c.disk, c.resident, f); rc != 0) ::_exit(rc);
      char line[640];
      const int n = std::snprintf(
          line, sizeof line,
          "case=round_%s storage=%s resident=%s values=%llu submit_ms_per_delta=%.1f close_ms_per_fragment=%.1f "
          "save_ms_per_fragment=%.1f round_s=%.2f bytes_up_per_site=%llu bytes_down_per_site=%llu "
          "fragment_loads=%llu peak_rss_mb=%.0f round_peak_rss_mb=%.0f",
          which.c_str(), c.disk ? "disk" : "memory", c.resident == 0 ? "all" : std::to_string(c.resident).c_str(),
          static_cast<unsigned long long>(f.values), f.submit_ms, f.close_ms, f.save_ms, f.round_s,
          static_cast<unsigned long long>(f.up), static_cast<unsigned long long>(f.down),
          static_cast<unsigned long long>(f.loads), peak_rss_mb(), f.round_peak_mb);
      std::fflush(stdout);
      const bool whole = ::write(fds[1], line, static_cast<std::size_t>(n)) == n;
      ::_exit(whole ? 0 : 1);
    }
    ::close(fds[1]);
    std::string line;
    char buf[256];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) line.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || line.empty()) {
      std::fprintf(stderr, "aggregator_round_bench: a case failed (status %d)\n", status);
      return 1;
    }
    lines.push_back(line);
  }
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  return 0;
}
