// The scheduling policy's vocabulary: resources, nodes, jobs, decisions and the
// policy's options. Plain values, no ownership. Ids are dense numbers: the
// scheduler service maps roster node ids (strings) and job ids onto them.
// Time is milliseconds on the caller's clock; the policy never reads a clock.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace loom::scheduler::policy {

using node_id = std::uint32_t;
using job_id = std::uint64_t;
using time_ms = std::int64_t;

inline constexpr time_ms never = std::numeric_limits<time_ms>::max();

// Same field names as roster's node_resources.
struct resources {
  std::uint32_t gpus = 0;
  std::uint32_t cpu_cores = 0;
  std::uint64_t memory_bytes = 0;

  bool operator==(const resources&) const = default;
};

resources operator+(const resources& a, const resources& b);
// REQUIRES: b fits in a (no dimension goes negative).
resources operator-(const resources& a, const resources& b);
resources operator*(const resources& a, std::uint32_t k);
// Every dimension of `need` is within `have`.
bool fits_in(const resources& need, const resources& have);
// Dimension-wise minimum.
resources min_of(const resources& a, const resources& b);
// How many members of size `per` fit in `have`; a zero `per` fits any number.
std::uint32_t members_fitting(const resources& have, const resources& per);

struct node_spec {
  node_id id = 0;
  std::string zone;  // site or zone; a job never spans two zones
  resources capacity;
};

// A job as submitted. A gang has min_members == max_members and is placed
// all-or-nothing; an elastic job runs with any size in min..max.
struct job_spec {
  job_id id = 0;
  std::string tenant;
  int priority = 0;                // priority class; higher is more important
  std::vector<std::string> zones;  // allowed zones; empty = any
  resources per_member;
  std::uint32_t min_members = 1;
  std::uint32_t max_members = 1;
  time_ms estimated_runtime = 0;   // for backfill; a running job is assumed to end at start + this
  time_ms min_runtime = 0;         // not preempted before it has run this long (stops preemption loops)
  bool checkpointable = false;     // preempted with checkpoint-then-stop, so little work is lost
};

enum class action {
  place,    // start the job's members on `nodes` (one entry per member)
  preempt,  // stop the whole job (checkpoint first when checkpoint_first); it is queued again
  shrink,   // elastic job: stop the members on `nodes`; `size` is the new size
  grow,     // elastic job: add members on `nodes`; `size` is the new size
  requeue,  // the job lost a node; it is stopped and queued again at its old position
};

enum class reason {
  fits,             // place: fitted in free capacity in queue order
  backfill,         // place: started ahead of the reserved head without delaying it
  reclaim,          // shrink: capacity an elastic job borrowed above its minimum was taken back
  higher_priority,  // preempt/shrink: `for_job` has a higher priority class
  node_lost,        // requeue/shrink: a node holding members was removed
  idle_capacity,    // grow: capacity no queued job could use
  pressure,         // preempt: its nodes ran out of memory or CPU for long (load shedding, pause())
};

const char* to_string(action a);
const char* to_string(reason r);

struct decision {
  action what = action::place;
  job_id job = 0;
  std::vector<node_id> nodes;   // place/grow: added members; shrink: removed members
  std::uint32_t size = 0;       // members the job holds after this decision
  bool checkpoint_first = false;
  reason why = reason::fits;
  job_id for_job = 0;           // preempt/shrink: the job that needed the room
};

// Switches that turn the policy into the simulator's baselines:
//   fifo: {priority_order=false, fair_share=false, backfill=false, preemption=false, elastic=false}
//   easy: fifo with backfill=true, reserve=true.
struct policy_config {
  bool priority_order = true;  // order by priority class first (false: one class)
  bool fair_share = true;      // within a class, the tenant with the lowest weighted DRF share goes first
  bool backfill = true;        // later jobs may start while the head waits (false: strict FIFO)
  bool reserve = true;         // the blocked head holds an EASY reservation (false: greedy backfill)
  bool preemption = true;      // a blocked head may evict lower-priority jobs
  bool elastic = true;         // false: elastic jobs run rigidly at max_members
  // Lost work charged to a checkpointable victim: the restart (reload, warm-up), not its runtime.
  time_ms restart_cost = 60'000;
  // A job running past its estimate is assumed to end this much later: the reservation is
  // then recomputed at most once per interval instead of on every event.
  time_ms overrun_step = 60'000;
  // Queue entries examined per pass (Slurm's bf_max_job_test plays the same role): bounds the
  // decision time when the queue holds tens of thousands of jobs.
  std::uint32_t scan_limit = 1024;
  // Backfill stops after this many candidates in a row could not start: by then the free
  // capacity is fragments that no queued shape fits. Also a decision-time bound.
  std::uint32_t backfill_give_up = 256;
};

}  // namespace loom::scheduler::policy
