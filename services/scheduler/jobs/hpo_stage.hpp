// hpo_stages: the job manager's owner of hpo stages (issue 15 item 7) and
// their trials. The stage never enters the policy; each trial segment (train
// trial t to its next rung, then score it) is a one-trainer policy job of its
// own in the job's zone, sized by the trial's memory, that the trainer runs
// as stage "NAME.tT" with stop_at = the rung. ASHA (hpo_search) decides at
// each segment's end; when it is done, the best trial's config, checkpoint
// and typed result (stage_rec::hpo_best) become the stage's (hpo_stage.cpp).
// Own state: each running search and its trial segments in the policy.
// Both are stored with the stage (stage_rec::hpo_search) after every change,
// so a search resumes after a scheduler restart: its journal is replayed,
// segments still running are re-attached to their trainers, the rest queued
// again under attempt numbers past any the lost scheduler may have handed
// out unsaved (a trainer still holding such a segment is told to stop, and
// its report is refused). Shared state:
// jobs_context, handed in by the job manager with each call. Runs on the
// scheduler actor.
#pragma once

#include "services/scheduler/jobs/hpo_search.hpp"
#include "services/scheduler/jobs/jobs_context.hpp"
#include "services/scheduler/jobs/trainer_poll.hpp"

#include <map>
#include <string>
#include <vector>

namespace loom::scheduler {

class hpo_stages {
 public:
  static bool is_hpo(const stage_rec& s);

  // Hpo stage i is queued: its search starts and its first segments queue
  // (the stage fails when the search cannot start).
  void start(jobs_context& cx, job_rec& j, std::size_t i, time_point now);
  // The scheduler restarted with hpo stage i queued (its search starts) or
  // running (it resumes from stage_rec::hpo_search; it fails when that is
  // missing or does not replay, naming why). True when the job failed.
  bool reload(jobs_context& cx, job_rec& j, std::size_t i, time_point now);
  // Stage i ended or its job was cancelled: its search is dropped and every
  // trial of the job leaves the policy and its trainer (told to stop at its
  // next poll). False when the stage had no search.
  bool stop(jobs_context& cx, const std::string& job, std::size_t i, time_point now);

  // A policy id of a trial segment (the policy's decisions about it come here).
  bool owns(policy::job_id pid) const { return trials_.count(pid) > 0; }
  void apply(jobs_context& cx, const policy::decision& d, time_point now);
  // A poll from the trainer holding a trial segment (sl.trial != 0).
  poll_answer poll(jobs_context& cx, const poll_report& r, jobs_context::slot& sl, time_point now);

 private:
  // An hpo stage's search: ASHA's state and each trial's last checkpoint.
  struct search_state {
    hpo_search search;
    std::vector<std::string> checkpoints;  // by trial: its last snapshot
    std::vector<std::string> nodes;        // by trial: the trainer of its last segment
    std::vector<std::uint32_t> attempts;   // by trial: the last attempt number handed out
  };
  // One trial segment in the policy: a one-trainer job of its own, in the job's zone.
  struct trial_run {
    std::string job;
    std::size_t stage = 0;
    hpo_segment seg;
    std::string node;     // while placed
    std::uint32_t attempts = 0;
  };

  static std::string search_key(const std::string& job, std::size_t stage);
  // The search's state into stage_rec::hpo_search, and that stage row to the store.
  void save(jobs_context& cx, job_rec& j, std::size_t i) const;
  std::string encode(const std::string& job, std::size_t i) const;
  // A restart: the search of stage i back from its stored state (false: it
  // cannot be, and `why` says why).
  bool resume(jobs_context& cx, job_rec& j, std::size_t i, time_point now, std::string* why);
  void fill(jobs_context& cx, job_rec& j, std::size_t i, time_point now);  // queue segments while ASHA has some
  void queue_segment(jobs_context& cx, job_rec& j, std::size_t i, const hpo_segment& seg, time_point now);
  // A trial segment as the policy's job `pid`: one trainer of the job's zone, the trial's memory.
  policy::job_spec trial_spec(const jobs_context& cx, const job_rec& j, std::size_t i, int trial,
                              policy::job_id pid) const;
  // A segment's end: ASHA decides; a promoted trial's next segment goes back
  // to the same trainer in this reply, else whatever the freed trainer got.
  poll_answer ended(jobs_context& cx, policy::job_id pid, const poll_report& r, time_point now);  // then save()
  poll_answer ended_unsaved(jobs_context& cx, policy::job_id pid, const poll_report& r, time_point now);
  void end_search(jobs_context& cx, job_rec& j, std::size_t i, time_point now);
  // Removes trials' directories (<out>/<stage>/trial-N) under this scheduler's jobs dir: an hpo_removed event.
  void remove_trials(jobs_context& cx, job_rec& j, std::size_t i, const std::vector<int>& trials,
                     const std::string& why, time_point now);
  void cancel_trials(jobs_context& cx, const std::string& job, time_point now);  // frees their trainers
  std::string trial_stage(const job_rec& j, const trial_run& t) const;  // "search.t3": what the trainer runs
  assignment trial_assignment(const jobs_context& cx, const job_rec& j, const trial_run& t) const;

  std::map<std::string, search_state> searches_;  // search_key -> a running hpo stage's search
  std::map<policy::job_id, trial_run> trials_;    // trial segments in the policy
  // Trial segments' policy ids, above every stage's (seq * 64 + stage).
  policy::job_id next_trial_pid_ = policy::job_id(1) << 52;
};

}  // namespace loom::scheduler
