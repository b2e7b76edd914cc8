#include "libs/hpo/worker_sim.hpp"

#include <optional>
#include <vector>

namespace loom::hpo {
namespace {

struct job {
  int trial = -1;
  std::int64_t from = 0, to = 0, ends = 0;
};

}  // namespace

result<sim_stats> run_workers(asha& search, int workers, const train_fn& train) {
  if (workers < 1) return make_error(errc::invalid_argument, "run_workers: workers must be at least 1");
  std::vector<std::optional<job>> busy(static_cast<std::size_t>(workers));
  sim_stats st;
  std::int64_t now = 0;
  auto fill = [&] {  // every free worker asks for work
    for (auto& w : busy) {
      if (w) continue;
      const suggestion s = search.suggest();
      if (s.what != suggestion::kind::start && s.what != suggestion::kind::resume) break;
      w = job{s.trial, s.from_step, s.to_step, now + (s.to_step - s.from_step)};
    }
  };
  fill();
  for (;;) {
    std::optional<std::size_t> next;
    for (std::size_t i = 0; i < busy.size(); ++i)
      if (busy[i] && (!next || busy[i]->ends < busy[*next]->ends)) next = i;
    if (!next) break;  // nothing running and nothing to start: done
    job j = *busy[*next];
    now = j.ends;
    auto loss = train(j.trial, j.from, j.to);
    if (!loss) return loss.err();
    st.steps += j.to - j.from;
    ++st.jobs;
    if (auto r = search.report(j.trial, j.to, *loss); !r) return r.err();
    if (search.next_action(j.trial) == action::promote) {
      // The same worker goes on with the same trial (its state is where it is).
      const std::int64_t to = search.rungs()[std::size_t(search.rung_of(j.trial) + 1)];
      busy[*next] = job{j.trial, j.to, to, now + (to - j.to)};
    } else {
      busy[*next].reset();
    }
    fill();
  }
  st.makespan = now;
  return st;
}

}  // namespace loom::hpo
