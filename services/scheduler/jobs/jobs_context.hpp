// jobs_context: what the job manager and its three placers share — the job
// table (jobs by id, each stage's policy id), the store writes and job
// events, the scheduling policy with its view of the trainers, and each
// trainer's slot (what it runs). job_manager is the one jobs_context (it
// derives from it); policy_stages, hpo_stages and site_stages are handed it
// by reference in each call and keep only state of their own, so a
// job_manager moves as one value.
//
// Two operations are the dispatcher's, because they may concern a stage of
// any kind: apply() routes the policy's decisions (a trial segment's to
// hpo_stages, a stage's to policy_stages) and stage_done() ends a stage and
// queues the next one by its kind (job_manager.cpp).
// Owned by the scheduler actor; not thread-safe; no CAF, no ZeroMQ; clock passed in.
#pragma once

#include "services/scheduler/jobs/job_store.hpp"
#include "services/scheduler/policy/policy.hpp"
#include "services/scheduler/roster.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::store {
class database;
class transaction;
}  // namespace loom::store

namespace loom::scheduler {

class jobs_context {
 public:
  using unit = std::function<status(store::transaction&)>;
  using async_writer = std::function<void(unit)>;
  using event_sink = std::function<void(const job_rec&, const job_event&)>;

  struct slot {  // what a trainer node runs
    std::string job;
    std::size_t stage = 0;
    std::uint32_t rank = 0;          // its place in the stage's group
    bool delivered = false;          // the trainer has reported running it
    std::uint64_t running_gen = 0;   // the generation it reported running
    bool finished = false;           // rank > 0 finished its part; rank 0 ends the stage
    std::uint64_t notices_acked = 0; // the trainer's notices recorded as job events
    policy::job_id trial = 0;        // an hpo trial's segment (hpo_stages), 0: a stage
  };

  jobs_context(store::database* db, std::string jobs_root, std::chrono::milliseconds min_runtime);
  virtual ~jobs_context() = default;
  jobs_context(jobs_context&&) = default;
  jobs_context& operator=(jobs_context&&) = default;

  // The dispatcher's (job_manager.cpp): the policy's decisions, whichever
  // kind of stage each concerns; and a stage's end — `at_site`: its result is
  // kept at that edge site (its trainer's checkpoint), not the cloud's.
  virtual void apply(const policy::policy::decisions& ds, time_point now) = 0;
  virtual void stage_done(job_rec& j, std::size_t stage, bool ok, const std::string& message, time_point now,
                          const std::string& at_site = "") = 0;

  // Runs `fn` in a transaction now, or queues it with the async writer (then ok).
  status persist(unit fn) const;
  // Appends a job event (and with save_whole the job's row and stages), then tells the sink.
  status record(job_rec& j, const std::string& stage, const std::string& kind, const std::string& text,
                time_point now, bool save_whole = true);
  policy::job_spec spec_of(const job_rec& j, std::size_t stage) const;
  static policy::job_id pid_of(const job_rec& j, std::size_t stage) { return j.seq * 64 + stage; }
  const std::string& zone_of(const job_rec& j) const { return j.zone.empty() ? home_zone_ : j.zone; }
  static policy::time_ms ms(time_point t);
  static std::int64_t ns(time_point t);
  static std::string member_list(const std::vector<std::string>& nodes);  // "a, b, c"
  // The directory of stage i's final checkpoints (an hpo stage: its best trial's).
  std::string checkpoints_of(const job_rec& j, std::size_t i) const;

  // A stage's slots follow its members (jobs_context.cpp).
  // Removes the stage's slots (every member's) and returns them by node.
  std::map<std::string, slot> take_slots(const job_rec& j, std::size_t stage);
  // A new formation: each member's slot by rank, keeping what it had reported; a new generation.
  void set_members(job_rec& j, std::size_t stage, std::vector<std::string> members);
  void clear_members(job_rec& j, std::size_t stage);

  // The shared state. Members keep job_manager's names (it is the owner).
  store::database* db_;
  std::string root_;                                       // <data dir>/jobs
  std::chrono::milliseconds min_runtime_;
  policy::policy policy_;
  std::map<std::string, job_rec> jobs_;                    // by id
  std::map<policy::job_id, std::pair<std::string, std::size_t>> by_pid_;  // a stage's policy id -> job, stage
  std::map<std::string, policy::node_id> node_ids_;        // trainer node -> policy node
  std::map<policy::node_id, std::string> node_names_;
  std::map<std::string, bool> in_policy_;                  // node -> added (and alive) in the policy
  std::map<std::string, bool> cordoned_;                   // node -> draining in the policy
  std::map<std::string, slot> slots_;                      // node -> its assignment
  event_sink sink_;
  async_writer writer_;
  std::string home_zone_ = "local";
  std::string pausing_;  // the text of the load-shedding pause being applied (load_shedding.hpp)
  std::string grant_key_;
};

}  // namespace loom::scheduler
