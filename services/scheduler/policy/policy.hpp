// The scheduling policy: pure logic that turns events (submit, finish, cancel,
// node add/remove, tick) into decisions (place, preempt, shrink, grow, requeue).
// No clock, no I/O, no randomness: the same event sequence yields the same
// decisions. Owned by the scheduler actor; not thread-safe.
//
// Rules, in the order a scheduling pass applies them (README.md has the why):
//  1. Queue order: priority class (high first); inside a class the tenant with the
//     lowest weighted dominant share  max_d(used_d / capacity_d) / weight  goes first;
//     inside a tenant, arrival order (a requeued job keeps its original position).
//  2. A job is placed all-or-nothing inside one zone, best fit (fullest nodes first);
//     an elastic job gets as many members as fit, from min up to max.
//  3. A job that does not fit may take back capacity elastic jobs of its priority or
//     lower borrowed above their minimum (shrink); then, if it is the head, evict whole
//     jobs of strictly lower priority that have run at least their min_runtime,
//     cheapest first, and only if that lets it start now.
//  4. The first job still blocked holds an EASY reservation (earliest start from the
//     running jobs' estimated ends); later jobs start only if they end before it or use
//     capacity the reservation does not need. The holder keeps it until it starts.
//  5. Capacity left over goes to elastic jobs below max (grow).
#pragma once

#include "libs/status/status.hpp"
#include "services/scheduler/policy/cluster.hpp"
#include "services/scheduler/policy/types.hpp"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

namespace loom::scheduler::policy {

enum class job_state { queued, running };

// A read-only view of one job for callers and tests.
struct job_view {
  const job_spec* spec = nullptr;
  job_state state = job_state::queued;
  time_ms submitted = 0;
  time_ms started = 0;                // last start (running only)
  std::vector<node_id> members;       // one node per member (running only)
};

class policy {
 public:
  using decisions = std::vector<decision>;

  explicit policy(policy_config cfg = {});

  // Every event runs one scheduling pass and returns its decisions in the order the
  // service must carry them out (a preempt before the place that needs its room).
  result<decisions> submit(job_spec job, time_ms now);   // invalid_argument, already_exists
  // A job that was running before the caller restarted, put back on the same
  // nodes (re-attach): no decision places it, a pass runs afterwards for the rest.
  // invalid_argument when a node is unknown or lacks room, or members != gang size.
  result<decisions> restore_running(job_spec job, const std::vector<node_id>& nodes, time_ms started,
                                    time_ms now);
  result<decisions> finish(job_id id, time_ms now);      // not_found unless running
  // A pipeline's stage switch: `id` finishes and `next` (the job's next stage)
  // is queued in its place in the queue (id's arrival order), in one pass, so
  // the room id frees goes to next before lower classes and before jobs of its
  // class and tenant that arrived after id (a reservation holder keeps its
  // precedence, rule 4). Never "finish, place someone, then preempt them".
  // not_found unless id is running; submit's errors for next (nothing changed).
  result<decisions> finish_and_submit(job_id id, job_spec next, time_ms now);
  result<decisions> cancel(job_id id, time_ms now);      // not_found unless known
  result<decisions> add_node(const node_spec& n, time_ms now);
  // A dead node: gangs with a member there are requeued at their old position; elastic
  // jobs that keep at least min_members shrink instead.
  result<decisions> remove_node(node_id id, time_ms now);
  // A draining node (on) keeps its running members but is given no new ones,
  // nor counted for reservations or evictions; off makes it placeable again.
  // not_found unless the node is present.
  result<decisions> set_draining(node_id id, bool on, time_ms now);
  // Load shedding (issue 30): the job is stopped (checkpoint first when
  // checkpointable) and queued again at its old position, like a preemption
  // with no beneficiary (reason::pressure). The caller drains the pressed
  // nodes first, so the pass that follows does not put it straight back.
  // not_found unless running.
  result<decisions> pause(job_id id, time_ms now);
  decisions tick(time_ms now);
  // Weight of a tenant in fair share (default 1). REQUIRES: weight > 0.
  void set_tenant_weight(const std::string& tenant, double weight);

  std::optional<job_view> find(job_id id) const;
  std::size_t queued() const { return queued_count_; }
  std::size_t running() const { return running_.size(); }
  const resources& capacity() const { return cluster_.capacity(); }
  const resources& free() const { return cluster_.free(); }
  // Whether the job could start on free capacity right now, ignoring the queue.
  bool fits_now(const job_spec& job) const;
  // The reservation held by the blocked head: (job, earliest start), if any.
  std::optional<std::pair<job_id, time_ms>> reservation() const;
  // Weighted dominant share of a tenant (rule 1).
  double share(const std::string& tenant) const;
  // Recomputes every node's usage from the allocations and checks it against the
  // index, gang sizes and queue membership. For tests; O(nodes + jobs).
  status check_invariants() const;

 private:
  struct job_rec {
    job_spec spec;
    std::uint32_t tenant = 0;
    std::vector<std::uint32_t> zones;  // allowed zone indices, resolved at submit
    bool any_zone = true;
    std::uint64_t seq = 0;             // arrival order, kept across requeues
    int prio_key = 0;
    std::uint32_t tenant_key = 0;
    job_state state = job_state::queued;
    time_ms submitted = 0;
    time_ms started = 0;
    time_ms est_end = 0;
    std::uint32_t zone = 0;                 // running: its zone
    std::vector<std::uint32_t> members;     // running: node index per member
    std::uint32_t min_size = 1, max_size = 1;
    bool elastic() const { return max_size > min_size; }
  };
  struct tenant_rec {
    std::string name;
    double weight = 1.0;
    resources used;
  };
  using tenant_q = std::map<std::uint64_t, job_rec*>;           // seq -> job (stable: node-based map)
  using class_q = std::map<std::uint32_t, tenant_q>;            // tenant -> jobs
  enum class fit_mode { now, short_fill, long_fill };

  // Validates and queues a new job without a scheduling pass (submit, restore_running).
  status check_new(const job_spec& job) const;  // submit's argument checks
  // `seq`: the arrival order to take (a stage switch keeps its job's); default a new one.
  result<job_rec*> submit_queued_only(job_spec job, time_ms now, std::optional<std::uint64_t> seq = std::nullopt);
  // Scheduling pass (policy.cpp).
  void schedule(time_ms now, decisions& out);
  bool try_place(job_rec& j, fit_mode mode, time_ms now, decisions& out, reason why);
  bool place_in(job_rec& j, std::uint32_t zone, fit_mode mode, time_ms now, decisions& out, reason why);
  bool try_make_room(job_rec& j, fit_mode mode, bool evict, time_ms now, decisions& out);
  void grow_elastic(time_ms now, decisions& out);
  // Bookkeeping (policy.cpp).
  void start(job_rec& j, std::uint32_t zone, const std::vector<std::uint32_t>& nodes, time_ms now);
  void add_members(job_rec& j, const std::vector<std::uint32_t>& nodes);
  void drop_members(job_rec& j, std::size_t keep);  // keeps the first `keep` members
  void stop(job_rec& j);                            // releases everything, queues at old position
  void enqueue(job_rec& j);
  void dequeue(job_rec& j);
  std::vector<node_id> ids(const std::vector<std::uint32_t>& idx) const;
  std::uint32_t tenant_index(const std::string& name);
  double share_of(std::uint32_t tenant) const;
  std::vector<std::uint32_t> zones_of(const job_rec& j) const;
  // Reservation (reservation.cpp).
  void ensure_reservation(job_rec& head, time_ms now);
  void clear_reservation();
  void reset_delta();
  void add_delta(std::uint32_t n, const resources& r);
  resources cap(std::uint32_t idx, fit_mode mode) const;
  std::uint32_t borrowed(const job_rec& j) const { return j.members.size() > j.min_size ? static_cast<std::uint32_t>(j.members.size()) - j.min_size : 0; }

  policy_config cfg_;
  cluster cluster_;
  std::unordered_map<job_id, job_rec> jobs_;
  std::vector<tenant_rec> tenants_;
  std::map<std::string, std::uint32_t> tenant_ids_;
  std::map<int, class_q, std::greater<int>> queue_;
  std::size_t queued_count_ = 0;
  std::size_t queued_gpuless_ = 0;  // queued jobs needing no GPU: they may fit when no GPU is free
  std::uint64_t next_seq_ = 0;
  std::set<std::pair<time_ms, job_id>> by_end_;           // running jobs by estimated end
  std::set<job_id> running_;
  std::vector<std::set<job_id>> running_in_zone_;
  std::set<std::tuple<int, std::uint64_t, job_id>> elastic_;  // running elastic: (-prio, seq, id)
  std::vector<std::set<std::tuple<int, std::uint64_t, job_id>>> elastic_in_zone_;
  // Per zone, for quick rejection of make-room what-ifs: GPUs borrowed by elastic jobs,
  // and GPUs held per priority class.
  std::vector<std::uint64_t> zone_borrowed_gpus_;
  std::vector<std::map<int, std::uint64_t>> zone_prio_gpus_;
  void resize_zones();
  bool has_borrowed() const {
    for (auto g : zone_borrowed_gpus_)
      if (g) return true;
    return false;
  }

  // EASY reservation of the blocked head (rule 4).
  std::optional<job_id> holder_;
  bool plan_dirty_ = true;
  time_ms shadow_ = never;                  // earliest start of the holder
  std::vector<std::uint32_t> plan_nodes_;
  std::vector<char> in_plan_;               // per node index
  std::vector<resources> slack_;            // per plan node: capacity at shadow not needed by it
  // Failed eviction attempt for the holder: retried when capacity or time changes.
  std::optional<job_id> evict_failed_for_;
  std::uint64_t evict_failed_epoch_ = 0;
  time_ms evict_retry_at_ = never;
  std::uint64_t capacity_epoch_ = 0;
  // Scratch for what-if computations (sized to the node count).
  std::vector<resources> delta_;
  std::vector<std::uint32_t> touched_;
};

}  // namespace loom::scheduler::policy
