// policy_stages: the stages the scheduling policy places (policy/) — every
// stage but an hpo stage (hpo_stages) and an edge-site diloco stage
// (site_stages). It submits a queued stage to the policy, taking over the
// queue place of the stage before it; applies the policy's decisions about
// it (place, grow, shrink, preempt, requeue; a stage whose trainer is lost
// max_node_losses times fails); and re-attaches a running stage after a
// scheduler restart (policy::restore_running).
//
// It also runs the group protocol every placed stage's members speak,
// whoever placed them (job_groups.cpp): each member's poll (progress from
// rank 0, notices, the end), regroups and generations, and the assignment
// with the group's peers — an edge-site stage's members poll through it too
// (site_stages places them; `site_stage` tells where its result is kept).
// Own state: each trainer's collective inbox. Shared state: jobs_context,
// handed in by the job manager with each call. Runs on the scheduler actor.
#pragma once

#include "services/scheduler/jobs/jobs_context.hpp"
#include "services/scheduler/jobs/trainer_poll.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace loom::scheduler {

class policy_stages {
 public:
  // A stage whose group asked to re-form more often than this fails (a member
  // that cannot keep up, or a peer that cannot be reached, should not loop forever).
  static constexpr std::uint32_t max_regroups = 20;
  // A stage whose trainer stopped answering this often while running it fails:
  // a stage that makes its node unresponsive (threads, memory) would otherwise
  // take down every trainer it is placed on, one after the other.
  static constexpr std::uint32_t max_node_losses = 2;
  // Counts a loss of stage s's trainer. A loss counts as the first again when
  // the stage trained on since the previous one and the trainer lost then came
  // back (a link cut, a kill -9 its supervisor restarted); otherwise it adds
  // to the count: lost twice at one step (a crash loop), or two trainers it
  // ran on gone for good (a stage that hangs every node it is placed on).
  static std::uint32_t lost_again(const jobs_context& cx, stage_rec& s, time_point now);
  // Trainer `node`, the same process, registers again after `silent` without
  // an answer, its own loop at most `late` behind its plan: a loss of it in
  // that silence counts against no stage when the loop ran on time (a cut
  // link, not a stopped or starved process). Each such stage gets an event.
  void cut_off(jobs_context& cx, const std::string& node, std::chrono::milliseconds silent,
               std::chrono::milliseconds late, time_point now) const;

  // Stage i is queued: into the policy. `after` (the stage before, which
  // just succeeded) hands its queue place over.
  void queue(jobs_context& cx, job_rec& j, std::size_t i, std::optional<policy::job_id> after, time_point now) const;
  // One of the policy's decisions about stage i of j (a job not terminal).
  void apply(jobs_context& cx, const policy::decision& d, job_rec& j, std::size_t i, time_point now) const;
  // The scheduler restarted while stage i ran: true when re-attached (every
  // member alive); false when set queued again (the caller queues it).
  bool reload(jobs_context& cx, job_rec& j, std::size_t i, time_point now) const;

  // Group protocol (job_groups.cpp).
  // Keeps the collective inbox a poll announces.
  void heard(const poll_report& r);
  // A poll from the trainer holding `sl`, a member of a placed stage;
  // `site_stage`: an edge-site stage (its result is the cloud's export).
  poll_answer poll(jobs_context& cx, const poll_report& r, jobs_context::slot& sl, bool site_stage, time_point now);

 private:
  void fail_lost(jobs_context& cx, job_rec& j, std::size_t i, time_point now) const;
  void regroup(jobs_context& cx, job_rec& j, std::size_t i, const std::string& why, time_point now) const;
  // nullopt while a member of a group has not said where its inbox is.
  std::optional<assignment> assignment_of(const jobs_context& cx, const job_rec& j, std::size_t i,
                                          std::uint32_t rank) const;

  std::map<std::string, peer_info> peers_;  // node -> its collective inbox (from polls)
};

}  // namespace loom::scheduler
