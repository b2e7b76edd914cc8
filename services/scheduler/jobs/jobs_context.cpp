// jobs_context: the store writes and events, policy specs and the slot
// bookkeeping the job manager and its placers share (jobs_context.hpp).
#include "services/scheduler/jobs/jobs_context.hpp"

#include "libs/runspec/job_template.hpp"
#include "libs/store/database.hpp"

namespace loom::scheduler {

jobs_context::jobs_context(store::database* db, std::string jobs_root, std::chrono::milliseconds min_runtime)
    : db_(db), root_(std::move(jobs_root)), min_runtime_(min_runtime) {}

std::int64_t jobs_context::ns(time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

policy::time_ms jobs_context::ms(time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::string jobs_context::member_list(const std::vector<std::string>& nodes) {
  std::string out;
  for (const auto& m : nodes) out += (out.empty() ? "" : ", ") + m;
  return out;
}

status jobs_context::persist(unit fn) const {
  if (writer_) {
    writer_(std::move(fn));
    return ok_status();
  }
  if (!db_) return ok_status();
  return db_->with_transaction([&](store::transaction& tx) { return fn(tx); });
}

status jobs_context::record(job_rec& j, const std::string& stage, const std::string& kind, const std::string& text,
                            time_point now, bool save_whole) {
  job_event e{j.next_event, ns(now), stage, kind, text};
  j.updated_ns = ns(now);
  ++j.next_event;
  std::optional<job_rec> whole;  // the unit owns what it writes: it may run later
  if (save_whole) whole = j;
  auto st = persist([id = j.id, e, whole = std::move(whole)](store::transaction& tx) -> status {
    if (auto s = add_event(tx, id, e); !s) return s;
    if (whole) return save_job(tx, *whole);
    return ok_status();
  });
  if (!st) --j.next_event;  // not written: the seq is reused by the next event
  else if (sink_) sink_(j, e);
  return st;
}

policy::job_spec jobs_context::spec_of(const job_rec& j, std::size_t stage) const {
  policy::job_spec s;
  s.id = pid_of(j, stage);
  s.tenant = j.tenant;
  s.priority = runspec::priority_of(j.priority_class);
  s.zones = {zone_of(j)};  // a job that names no zone runs in the scheduler's own
  s.per_member = {0, 1, j.stages[stage].memory_bytes};
  s.min_members = j.stages[stage].min_trainers;
  s.max_members = j.stages[stage].max_trainers;
  s.estimated_runtime = 600'000;  // 10 min: used for backfill ordering only
  s.min_runtime = min_runtime_.count();  // not preempted before this
  s.checkpointable = true;
  return s;
}

std::string jobs_context::checkpoints_of(const job_rec& j, std::size_t i) const {
  const stage_rec& s = j.stages[i];
  const std::string trials = j.out_dir + "/" + s.name + "/trial-";
  if (s.checkpoint.rfind(trials, 0) == 0) {  // an hpo stage: its best trial's snapshots
    const auto slash = s.checkpoint.find('/', trials.size());
    return s.checkpoint.substr(0, slash) + "/checkpoints";
  }
  return j.out_dir + "/" + s.name + "/checkpoints";
}

std::map<std::string, jobs_context::slot> jobs_context::take_slots(const job_rec& j, std::size_t i) {
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

void jobs_context::set_members(job_rec& j, std::size_t i, std::vector<std::string> members) {
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

void jobs_context::clear_members(job_rec& j, std::size_t i) {
  take_slots(j, i);
  j.stages[i].members.clear();
}

}  // namespace loom::scheduler
