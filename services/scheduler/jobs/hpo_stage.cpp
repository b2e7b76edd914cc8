// hpo_stages (hpo_stage.hpp): the scheduler coordinates an hpo stage's
// search (issue 15 item 7). The stage itself never enters the policy; each
// trial segment (train trial t to its next rung, then score it) is a
// one-trainer job of its own, placed in the job's zone like its other stages
// and sized by the trial's own memory need, that the trainer runs as stage
// "NAME.tT" with stop_at = the rung. Its end reports the validation loss;
// ASHA (hpo_search) promotes the trial (its next segment is queued at once,
// normally onto the trainer it frees), stops it (pruned: nothing more is
// queued, its trainer takes the next segment) or completes it. When ASHA is
// done the best trial's config and checkpoint become the stage's: its
// config_toml is the trial's, its hpo_best the typed result, the model
// registry registers that checkpoint, and the next stage runs with the best
// values and starts from it. A trial ASHA will never run again (failed, or
// pruned for good: hpo::asha::retired) has its directory removed at once;
// when the search ends, every trial's but the best's. Its state is saved
// with the stage and replayed after a scheduler restart: hpo_journal.cpp.
#include "services/scheduler/jobs/hpo_stage.hpp"

#include "libs/runspec/hpo_stage.hpp"
#include "libs/runspec/job_template.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

namespace loom::scheduler {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string verdict(hpo::action a, std::int64_t next) {
  switch (a) {
    case hpo::action::promote: return "promoted to step " + std::to_string(next);
    case hpo::action::stop: return "stopped (pruned; its trainer is free)";
    case hpo::action::complete: return "complete";
    case hpo::action::continue_training: break;
  }
  return "continues";
}

}  // namespace

bool hpo_stages::is_hpo(const stage_rec& s) {
  if (s.config_toml.find("hpo") == std::string::npos) return false;  // cheap first look
  auto spec = runspec::parse_run_config(s.config_toml, "stage " + s.name, {"model.init_from=\"/x\""});
  return spec && spec->kind == "hpo";
}

std::string hpo_stages::search_key(const std::string& job, std::size_t stage) {
  return job + "/" + std::to_string(stage);
}

std::string hpo_stages::trial_stage(const job_rec& j, const trial_run& t) const {
  return j.stages[t.stage].name + ".t" + std::to_string(t.seg.trial);
}

void hpo_stages::start(jobs_context& cx, job_rec& j, std::size_t i, time_point now) {
  stage_rec& s = j.stages[i];
  auto spec = runspec::parse_run_config(s.config_toml, j.id + "/" + s.name, {"model.init_from=\"/x\""});
  auto made = spec ? hpo_search::make(s.config_toml, *spec) : result<hpo_search>(spec.err());
  if (!made) {
    s.state = "running";  // stage_done's bookkeeping expects a started stage
    cx.stage_done(j, i, false, "its hpo search cannot start: " + made.err().message, now);
    return;
  }
  s.state = "running";
  s.started_ns = s.started_ns ? s.started_ns : cx.ns(now);
  s.step = 0;
  s.total_steps = static_cast<std::uint64_t>(made->sweep_steps());
  j.state = "running";
  std::string rungs;
  for (auto r : made->rungs()) rungs += (rungs.empty() ? "" : ", ") + std::to_string(r);
  const std::size_t n = made->trials();
  const std::int64_t sweep = made->sweep_steps();
  searches_.emplace(search_key(j.id, i), search_state{std::move(*made), std::vector<std::string>(n),
                                                      std::vector<std::string>(n), std::vector<std::uint32_t>(n, 0)});
  (void)cx.record(j, s.name, "hpo_started",
               std::to_string(n) + " trials, ASHA rungs at steps " + rungs + " (a full sweep: " +
                   std::to_string(sweep) + " steps); trials run on free trainers of " +
                   (j.zone.empty() ? std::string("any zone") : "zone " + j.zone),
               now);
  fill(cx, j, i, now);
  save(cx, j, i);
}

bool hpo_stages::stop(jobs_context& cx, const std::string& job, std::size_t i, time_point now) {
  if (!searches_.erase(search_key(job, i))) return false;
  if (auto j = cx.jobs_.find(job); j != cx.jobs_.end() && i < j->second.stages.size())
    j->second.stages[i].hpo_search.clear();  // stored with the stage's end
  cancel_trials(cx, job, now);
  return true;
}

void hpo_stages::fill(jobs_context& cx, job_rec& j, std::size_t i, time_point now) {
  auto it = searches_.find(search_key(j.id, i));
  if (it == searches_.end() || j.terminal()) return;
  // One segment waits in the queue at a time: ASHA picks the next one only
  // when a trainer may take it, so later picks see more results.
  for (;;) {
    std::size_t waiting = 0;
    for (const auto& [pid, t] : trials_) waiting += t.job == j.id && t.stage == i && t.node.empty();
    if (waiting > 0) return;
    auto seg = it->second.search.next();
    if (!seg) break;
    queue_segment(cx, j, i, *seg, now);
    if (!searches_.count(search_key(j.id, i))) return;  // ended while placing (cannot, but cheap to check)
  }
  bool running = false;
  for (const auto& [pid, t] : trials_) running |= t.job == j.id && t.stage == i;
  if (!running && it->second.search.done()) end_search(cx, j, i, now);
}

void hpo_stages::queue_segment(jobs_context& cx, job_rec& j, std::size_t i, const hpo_segment& seg,
                               time_point now) {
  const policy::job_id pid = next_trial_pid_++;
  trials_[pid] = trial_run{j.id, i, seg, "", searches_.at(search_key(j.id, i)).attempts[std::size_t(seg.trial)]};
  if (auto d = cx.policy_.submit(trial_spec(cx, j, i, seg.trial, pid), cx.ms(now))) cx.apply(*d, now);
}

policy::job_spec hpo_stages::trial_spec(const jobs_context& cx, const job_rec& j, std::size_t i, int trial,
                                        policy::job_id pid) const {
  policy::job_spec spec = cx.spec_of(j, i);  // the job's zone, as its other stages
  spec.id = pid;
  spec.per_member.memory_bytes = searches_.at(search_key(j.id, i)).search.memory_of(trial);
  spec.min_members = spec.max_members = 1;
  return spec;
}

void hpo_stages::apply(jobs_context& cx, const policy::decision& d, time_point now) {
  const policy::job_id pid = d.job;
  trial_run& t = trials_.at(pid);
  job_rec& j = cx.jobs_.at(t.job);
  const std::string name = trial_stage(j, t);
  if (d.what == policy::action::place && !d.nodes.empty()) {
    t.node = cx.node_names_.at(d.nodes.front());
    ++t.attempts;
    searches_.at(search_key(j.id, t.stage)).attempts[std::size_t(t.seg.trial)] = t.attempts;
    jobs_context::slot sl;
    sl.job = t.job;
    sl.stage = t.stage;
    sl.trial = pid;
    cx.slots_[t.node] = sl;
    (void)cx.record(j, j.stages[t.stage].name, "hpo_placed",
                 searches_.at(search_key(j.id, t.stage)).search.describe(t.seg.trial) + ": steps " +
                     std::to_string(t.seg.from) + " -> " + std::to_string(t.seg.to) + " on " + t.node,
                 now, false);
    const std::size_t stage = t.stage;
    fill(cx, j, stage, now);  // the next segment waits for the next free trainer
    save(cx, j, stage);
  } else if (d.what == policy::action::preempt || d.what == policy::action::requeue) {
    if (!t.node.empty()) cx.slots_.erase(t.node);  // its trainer's next poll is told to stop (it snapshots)
    (void)cx.record(j, j.stages[t.stage].name, "hpo_requeued",
                 name + " on " + t.node + ": " + policy::to_string(d.why) + "; resumes from its latest snapshot", now,
                 false);
    t.node.clear();
    save(cx, j, t.stage);
  }
}

assignment hpo_stages::trial_assignment(const jobs_context& cx, const job_rec& j, const trial_run& t) const {
  const stage_rec& s = j.stages[t.stage];
  const search_state& st = searches_.at(search_key(j.id, t.stage));
  assignment a;
  a.job = j.id;
  a.tenant = j.tenant;
  a.stage = trial_stage(j, t);
  a.config_toml = runspec::fill_stage_references(st.search.config_of(t.seg.trial), j.out_dir);
  a.out_dir = j.out_dir + "/" + s.name + "/trial-" + std::to_string(t.seg.trial);
  if (t.stage > 0) a.init_from = cx.checkpoints_of(j, t.stage - 1);
  a.attempt = t.attempts;
  a.stop_at = static_cast<std::uint64_t>(t.seg.to);
  a.eval_text = st.search.eval_text();
  return a;
}

poll_answer hpo_stages::poll(jobs_context& cx, const poll_report& r, jobs_context::slot& sl, time_point now) {
  poll_answer out;
  const policy::job_id pid = sl.trial;
  const trial_run& t = trials_.at(pid);
  job_rec& j = cx.jobs_.at(t.job);
  const bool mine = r.job == j.id && r.stage == trial_stage(j, t) && r.attempt == t.attempts;
  // What the trainer noticed while it ran the segment (its own process, a
  // crash and its restart, a rollback) becomes job events, each once, as a
  // plain stage's do (job_groups.cpp).
  if (mine) {
    for (const auto& n : r.notices) {
      if (n.seq <= sl.notices_acked) continue;
      (void)cx.record(j, j.stages[t.stage].name, n.kind, "trial " + std::to_string(t.seg.trial) + ": " + n.text, now, false);
      sl.notices_acked = n.seq;
    }
    out.notices_acked = sl.notices_acked;
  }
  if (mine && (r.state == "succeeded" || r.state == "failed")) {
    const auto acked = out.notices_acked;
    out = ended(cx, pid, r, now);
    out.notices_acked = acked;
    return out;
  }
  if (!r.job.empty() && (r.state == "succeeded" || r.state == "failed")) {  // not the segment it holds
    out.refused = "node " + r.node + " holds " + trial_stage(j, t) + " (attempt " + std::to_string(t.attempts) +
                  "): its report of " + r.job + "/" + r.stage + " (attempt " + std::to_string(r.attempt) + ", " +
                  r.state + ") is not applied";
    return out;
  }
  if (r.state == "running" && !mine) {  // running something else (an older segment): stop it first
    out.stop = true;
    return out;
  }
  if (mine && r.state == "running") sl.delivered = true;
  out.work = trial_assignment(cx, j, t);
  return out;
}

poll_answer hpo_stages::ended(jobs_context& cx, policy::job_id pid, const poll_report& r, time_point now) {
  trial_run& t = trials_.at(pid);
  job_rec& j = cx.jobs_.at(t.job);
  const std::size_t stage = t.stage;
  poll_answer out = ended_unsaved(cx, pid, r, now);
  save(cx, j, stage);  // ASHA's decision and what it queued, before the trainer acts on it
  return out;
}

poll_answer hpo_stages::ended_unsaved(jobs_context& cx, policy::job_id pid, const poll_report& r, time_point now) {
  poll_answer out;
  trial_run& t = trials_.at(pid);
  job_rec& j = cx.jobs_.at(t.job);
  stage_rec& s = j.stages[t.stage];
  search_state& st = searches_.at(search_key(j.id, t.stage));
  const bool scored = r.state == "succeeded" && r.val_step == static_cast<std::uint64_t>(t.seg.to) &&
                      std::isfinite(r.val_loss);
  const double loss = scored ? r.val_loss : std::numeric_limits<double>::quiet_NaN();
  if (!r.checkpoint.empty()) st.checkpoints[std::size_t(t.seg.trial)] = r.checkpoint;
  st.nodes[std::size_t(t.seg.trial)] = t.node;
  hpo::action a = hpo::action::stop;
  auto next = st.search.report(t.seg.trial, t.seg.to, loss, &a);
  if (!next) {  // a broken invariant of this file: end the search rather than loop
    cx.stage_done(j, t.stage, false, "hpo search: " + next.err().message, now);
    return out;
  }
  s.step = static_cast<std::uint64_t>(st.search.steps_granted());
  if (auto b = st.search.best()) s.loss = st.search.loss_of(*b);
  (void)cx.record(j, s.name, "hpo_trial",
               st.search.describe(t.seg.trial) + " on " + t.node + ", step " + std::to_string(t.seg.to) + ": " +
                   (scored ? "validation loss " + fixed(loss, 4) + ", " + verdict(a, *next ? (*next)->to : 0)
                           : "failed (" + (r.message.empty() ? "no validation loss" : r.message) + "), stopped"),
               now);
  remove_trials(cx, j, t.stage, st.search.take_retired(), "pruned for good: no later result can promote them", now);
  if (*next) {  // promoted: the same trainer goes on with it, from the rung's snapshot
    t.seg = **next;
    ++t.attempts;
    st.attempts[std::size_t(t.seg.trial)] = t.attempts;
    cx.slots_.at(t.node).delivered = false;
    out.work = trial_assignment(cx, j, t);
    return out;
  }
  // Pruned or complete: the trainer is free now, and takes what waits.
  const std::string node = t.node;
  const std::size_t stage = t.stage;
  trials_.erase(pid);
  cx.slots_.erase(node);
  if (auto d = cx.policy_.finish(pid, cx.ms(now))) cx.apply(*d, now);
  fill(cx, j, stage, now);
  if (auto sl = cx.slots_.find(node); sl != cx.slots_.end() && sl->second.trial != 0) {  // another trial starts here at once
    const trial_run& other = trials_.at(sl->second.trial);
    out.work = trial_assignment(cx, cx.jobs_.at(other.job), other);
  }
  return out;
}

void hpo_stages::end_search(jobs_context& cx, job_rec& j, std::size_t i, time_point now) {
  auto it = searches_.find(search_key(j.id, i));
  if (it == searches_.end()) return;
  stage_rec& s = j.stages[i];
  const search_state& st = it->second;
  const auto best = st.search.best();
  if (!best || !std::isfinite(st.search.loss_of(*best)) || st.checkpoints[std::size_t(*best)].empty()) {
    cx.stage_done(j, i, false, "hpo search: no trial reached a finite validation loss", now);
    return;
  }
  const int b = *best;
  remove_trials(cx, j, i, it->second.search.take_all_but_best(),
                "the search is over; the best, trial " + std::to_string(b) + ", is kept", now);
  const double spent = double(st.search.steps_granted()) / double(st.search.sweep_steps());
  s.checkpoint = st.checkpoints[std::size_t(b)];
  s.node = st.nodes[std::size_t(b)];  // who trained the result (to R)
  s.loss = st.search.loss_of(b);
  s.config_toml = st.search.config_of(b);  // the stage's result: the best trial's run config
  std::string values;
  for (const auto& kv : st.search.overrides_of(b)) values += (values.empty() ? "" : " ") + kv;
  // The result, typed for `loom job show` (stored with the stage by the event's save below).
  s.hpo_best = hpo_best_rec{b,
                            st.search.values_of(b),
                            s.loss,
                            static_cast<std::uint64_t>(st.search.max_steps()),
                            s.checkpoint,
                            static_cast<std::uint64_t>(st.search.steps_granted()),
                            static_cast<std::uint64_t>(st.search.sweep_steps())};
  (void)cx.record(j, s.name, "hpo_best",
               "best " + st.search.describe(b) + ": validation loss " + fixed(s.loss, 4) + " at step " +
                   std::to_string(st.search.max_steps()) + ", checkpoint " + s.checkpoint + "; " +
                   std::to_string(st.search.steps_granted()) + " of a full sweep's " +
                   std::to_string(st.search.sweep_steps()) + " steps (" + fixed(spent, 3) + ")",
               now);
  if (i + 1 < j.stages.size()) {  // the next stage runs with the best values
    auto next = runspec::with_overrides(j.stages[i + 1].config_toml, st.search.overrides_of(b));
    if (next) {
      j.stages[i + 1].config_toml = *next;
      // Sized at submit for the values that need the most; now for the best's.
      if (auto spec = runspec::parse_run_config(*next, j.id + "/" + j.stages[i + 1].name, {"model.init_from=\"/x\""}))
        j.stages[i + 1].memory_bytes = spec->memory().total();
      (void)cx.record(j, j.stages[i + 1].name, "hpo_inherited", "runs with " + values + " (the best trial's)", now);
    }
  }
  cx.stage_done(j, i, true, "", now);
}

void hpo_stages::remove_trials(jobs_context& cx, job_rec& j, std::size_t i, const std::vector<int>& trials,
                               const std::string& why, time_point now) {
  if (trials.empty()) return;
  namespace fs = std::filesystem;
  const std::string stage_dir = j.out_dir + "/" + j.stages[i].name;
  if (j.out_dir.rfind(cx.root_ + "/", 0) != 0) return;  // never outside this scheduler's jobs dir
  std::string removed, failed;
  for (int t : trials) {
    const std::string dir = stage_dir + "/trial-" + std::to_string(t);
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(dir, ec))) continue;  // never written here (or already gone)
    fs::remove_all(dir, ec);
    std::string& into = ec ? failed : removed;
    into += (into.empty() ? "" : ", ") + std::to_string(t) + (ec ? " (" + ec.message() + ")" : "");
  }
  if (!removed.empty())
    (void)cx.record(j, j.stages[i].name, "hpo_removed", "removed the directories of trials " + removed + " (" + why + ")",
                 now, false);
  if (!failed.empty())
    (void)cx.record(j, j.stages[i].name, "hpo_removed", "could not remove the directories of trials " + failed, now,
                 false);
}

void hpo_stages::cancel_trials(jobs_context& cx, const std::string& job, time_point now) {
  std::vector<policy::policy::decisions> freed;  // what the policy placed on the trials' room: applied after
  for (auto it = trials_.begin(); it != trials_.end();) {
    if (it->second.job != job) {
      ++it;
      continue;
    }
    if (!it->second.node.empty()) cx.slots_.erase(it->second.node);  // told to stop at its next poll
    if (auto d = cx.policy_.cancel(it->first, cx.ms(now)); d) freed.push_back(std::move(*d));
    it = trials_.erase(it);
  }
  for (const auto& d : freed) cx.apply(d, now);
}

}  // namespace loom::scheduler
