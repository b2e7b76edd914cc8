#include "services/scheduler/jobs/hpo_search.hpp"

namespace loom::scheduler {

result<hpo_search> hpo_search::make(const std::string& stage_toml, const runspec::run_config& spec) {
  auto plan = runspec::read_hpo_stage(stage_toml, "hpo stage", spec);
  if (!plan) return plan.err();
  std::vector<std::string> configs;
  std::vector<std::uint64_t> memory;
  for (std::size_t t = 0; t < plan->trials.size(); ++t) {
    runspec::run_config parsed;
    auto c = runspec::trial_config_toml(stage_toml, *plan, t, &parsed);
    if (!c) return c.err();
    configs.push_back(std::move(*c));
    memory.push_back(parsed.memory().total());
  }
  auto a = hpo::asha::make(plan->spec.asha, plan->trials);
  if (!a) return a.err();
  return hpo_search(std::move(*plan), std::move(*a), std::move(configs), std::move(memory));
}

std::vector<int> hpo_search::take_retired() {
  std::vector<int> out;
  for (int t = 0; t < int(trials()); ++t)
    if (!removed_[std::size_t(t)] && asha_.retired(t)) {
      removed_[std::size_t(t)] = true;
      out.push_back(t);
    }
  return out;
}

std::vector<int> hpo_search::take_all_but_best() {
  std::vector<int> out;
  if (!done()) return out;
  const auto b = best();
  for (int t = 0; t < int(trials()); ++t)
    if (!removed_[std::size_t(t)] && (!b || t != *b)) {
      removed_[std::size_t(t)] = true;
      out.push_back(t);
    }
  return out;
}

result<hpo_search> hpo_search::resume(const std::string& stage_toml, const runspec::run_config& spec,
                                      const std::vector<hpo_entry>& journal) {
  auto made = make(stage_toml, spec);
  if (!made) return made.err();
  hpo_search& s = *made;
  for (std::size_t k = 0; k < journal.size(); ++k) {
    const hpo_entry& e = journal[k];
    const std::string where = "hpo search journal entry " + std::to_string(k + 1) + " of " +
                              std::to_string(journal.size());
    if (e.what == hpo_entry::kind::segment) {
      auto seg = s.next();
      if (!seg || seg->trial != e.trial || seg->from != e.from || seg->to != e.to)
        return make_error(errc::invalid_argument,
                          where + ": it recorded trial " + std::to_string(e.trial) + " steps " +
                              std::to_string(e.from) + " -> " + std::to_string(e.to) + ", the search now gives " +
                              (seg ? "trial " + std::to_string(seg->trial) + " steps " + std::to_string(seg->from) +
                                         " -> " + std::to_string(seg->to)
                                   : std::string("nothing")) +
                              " (a journal of another search, or edited)");
    } else if (auto r = s.report(e.trial, e.to, e.loss, nullptr); !r) {
      return make_error(errc::invalid_argument, where + ": " + r.err().message);
    }
  }
  return made;  // take_retired() names every retired trial again: removing a directory twice is a no-op
}

std::vector<hpo_segment> hpo_search::in_flight() const {
  std::vector<hpo_segment> out;
  for (int t = 0; t < int(trials()); ++t)
    if (asha_.is_running(t)) out.push_back(hpo_segment{t, asha_.step_of(t), asha_.target_of(t)});
  return out;
}

std::optional<hpo_segment> hpo_search::next() {
  const hpo::suggestion s = asha_.suggest();
  if (s.what != hpo::suggestion::kind::start && s.what != hpo::suggestion::kind::resume) return std::nullopt;
  journal_.push_back(hpo_entry{hpo_entry::kind::segment, s.trial, s.from_step, s.to_step, 0});
  return hpo_segment{s.trial, s.from_step, s.to_step};
}

result<std::optional<hpo_segment>> hpo_search::report(int trial, std::int64_t step, double loss,
                                                      hpo::action* decision) {
  if (auto st = asha_.report(trial, step, loss); !st) return st.err();
  journal_.push_back(hpo_entry{hpo_entry::kind::report, trial, 0, step, loss});
  const hpo::action a = asha_.next_action(trial);
  if (decision) *decision = a;
  if (a != hpo::action::promote) return std::optional<hpo_segment>{};
  const int rung = asha_.rung_of(trial);
  return std::optional<hpo_segment>{hpo_segment{trial, step, asha_.rungs()[std::size_t(rung) + 1]}};
}

std::vector<std::pair<std::string, std::string>> hpo_search::values_of(int trial) const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& a : plan_.trials[std::size_t(trial)].values) out.emplace_back(a.key, a.text());
  return out;
}

std::string hpo_search::describe(int trial) const {
  return "trial " + std::to_string(trial) + " (" + plan_.trials[std::size_t(trial)].text() + ")";
}

}  // namespace loom::scheduler
