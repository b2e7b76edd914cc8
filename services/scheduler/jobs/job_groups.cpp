// job_manager's trainer groups: a stage's members by rank, their slots, the
// group's generation, and the assignment each member is given.
#include "services/scheduler/jobs/job_manager.hpp"
#include "libs/runspec/job_template.hpp"

namespace loom::scheduler {

std::string job_manager::member_list(const std::vector<std::string>& nodes) {
  std::string out;
  for (const auto& m : nodes) out += (out.empty() ? "" : ", ") + m;
  return out;
}

std::map<std::string, job_manager::slot> job_manager::take_slots(const job_rec& j, std::size_t i) {
  std::map<std::string, slot> taken;
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->second.job == j.id && it->second.stage == i) {
      taken.insert(*it);
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

void job_manager::set_members(job_rec& j, std::size_t i, std::vector<std::string> members) {
  stage_rec& s = j.stages[i];
  auto kept = take_slots(j, i);  // what each remaining member had reported
  s.members = std::move(members);
  s.node = s.members.empty() ? s.node : s.members.front();
  ++s.generation;  // a new formation: every member restarts from the latest snapshot
  for (std::uint32_t r = 0; r < s.members.size(); ++r) {
    slot sl = kept.count(s.members[r]) ? kept[s.members[r]] : slot{};
    sl.job = j.id;
    sl.stage = i;
    sl.rank = r;
    sl.finished = false;
    slots_[s.members[r]] = sl;
  }
}

void job_manager::clear_members(job_rec& j, std::size_t i) {
  take_slots(j, i);
  j.stages[i].members.clear();
}

void job_manager::regroup(job_rec& j, std::size_t i, const std::string& why, time_point now) {
  stage_rec& s = j.stages[i];
  ++s.generation;
  for (auto& [node, sl] : slots_)
    if (sl.job == j.id && sl.stage == i) sl.finished = false;
  (void)record(j, s.name, "regroup",
               why + "; the group (" + member_list(s.members) + ") re-forms as generation " + std::to_string(s.generation) +
                   " from the latest checkpoint",
               now);
}

std::optional<assignment> job_manager::assignment_of(const job_rec& j, std::size_t i, std::uint32_t rank) const {
  const stage_rec& s = j.stages[i];
  assignment a;
  a.job = j.id;
  a.tenant = j.tenant;
  a.stage = s.name;
  // "${stage.NAME.checkpoint}" (an rl stage's reward model) names that stage's final checkpoint.
  a.config_toml = runspec::fill_stage_references(s.config_toml, j.out_dir);
  a.out_dir = j.out_dir + "/" + s.name;
  // The previous stage's checkpoint, unless the stage names its own start
  // ("${stage.NAME.checkpoint}", filled into its config above).
  if (i > 0 && s.config_toml.find("init_from = '${stage.") == std::string::npos) a.init_from = checkpoints_of(j, i - 1);
  a.attempt = s.attempts;
  a.rank = rank;
  a.world = static_cast<std::uint32_t>(std::max<std::size_t>(1, s.members.size()));
  a.generation = s.generation;
  if (a.world > 1) {
    for (const auto& m : s.members) {
      auto p = peers_.find(m);
      if (p == peers_.end() || p->second.endpoint.empty()) return std::nullopt;  // not heard from yet
      a.peers.push_back(p->second);
    }
  }
  return a;
}

}  // namespace loom::scheduler
