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

std::optional<hpo_segment> hpo_search::next() {
  const hpo::suggestion s = asha_.suggest();
  if (s.what != hpo::suggestion::kind::start && s.what != hpo::suggestion::kind::resume) return std::nullopt;
  return hpo_segment{s.trial, s.from_step, s.to_step};
}

result<std::optional<hpo_segment>> hpo_search::report(int trial, std::int64_t step, double loss,
                                                      hpo::action* decision) {
  if (auto st = asha_.report(trial, step, loss); !st) return st.err();
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
