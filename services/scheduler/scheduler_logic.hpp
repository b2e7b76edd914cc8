// The scheduler's service logic: the node roster's requests (RegisterNode,
// NodeHeartbeat, ListNodes, DrainNode, UndrainNode; scheduler_logic_nodes.cpp,
// each node-scoped request checked against the caller's key: roster_binding.hpp)
// and training jobs (SubmitJob, ListJobs,
// GetJob, CancelJob, and the trainers' PollWork; jobs/job_manager.hpp). Runs inside the supervised service
// actor; holds no CAF, ZeroMQ or clock of its own (the clock is injected).
// With a state store the roster is loaded at construction (so a restarted
// actor or process keeps it) and every change is written before it is
// applied in memory; heartbeats are flushed once per tick. Given a writer
// connection, job changes go through a group commit instead (one fsync for
// every request that arrived meanwhile): the reply carries a commit ticket
// and the gateway sends it once the change is durable. A failed commit makes
// the next call throw, so the supervisor restarts the actor from the store.
#pragma once

#include "libs/runtime/handler_table.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/runtime/service_logic.hpp"
#include "libs/store/database.hpp"
#include "services/scheduler/jobs/job_manager.hpp"
#include "services/scheduler/roster.hpp"

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace loom::store {
class group_commit;
}  // namespace loom::store
namespace loom::metrics {
class service_metrics;
}
namespace loom::scheduler {
class site_registry;
struct site_rec;
class model_registry;
struct model_version_rec;
}  // namespace loom::scheduler
namespace loom::v1 {
class JobInfo;
class RegisterNodeRequest;
class NodeHeartbeatRequest;
class ListNodesRequest;
class DrainNodeRequest;
class UndrainNodeRequest;
class SubmitJobRequest;
class ListJobsRequest;
class GetJobRequest;
class CancelJobRequest;
class PollWorkRequest;
class IssueSiteTokenRequest;
class RevokeSiteRequest;
class ListSitesRequest;
class SiteKeysRequest;
class EnrolSiteRequest;
class SiteInfo;
class ListModelsRequest;
class GetModelRequest;
class DiffModelsRequest;
class RollbackModelRequest;
class RecordModelExportRequest;
class ResolveModelVersionRequest;
class ModelVersion;
}  // namespace loom::v1

namespace loom::scheduler {

class scheduler_logic final : public runtime::service_logic {
 public:
  using clock_fn = std::function<time_point()>;
  // What the service audits of the sites registry (sites/site_handlers.cpp):
  // site.token, site.revoke, site.enrol and site.enrol.refused.
  struct site_event {
    std::string action, site, principal, role, reason, payload;
    bool refused = false;
  };
  using site_sink = std::function<void(const site_event&)>;
  // Who caused a job event: the request being handled (a trainer's poll, a
  // submit, a cancel, a site's revocation) — its token principal, role and
  // tenant and its connection's CURVE principal; empty for what the
  // scheduler does on its own (placements at a tick, a restart).
  struct event_caller {
    std::string principal, role, tenant, peer, request_id;
  };
  using job_event_sink = std::function<void(const job_rec&, const job_event&, const event_caller&)>;
  // Throws std::runtime_error when the stored roster cannot be loaded (the
  // supervisor retries with backoff).
  // jobs_root: where job stages write (<data dir>/jobs).
  // on_job_event: told of every stored job event and who caused it (the service audits them).
  // min_runtime: before it, a running stage is never preempted.
  // home_zone: the scheduler's own zone, where a job that names none runs.
  explicit scheduler_logic(
      store::database* db = nullptr, clock_fn now = [] { return loom::wall_now(); },
      std::string jobs_root = "/tmp/loom-jobs", job_event_sink on_job_event = {},
      std::chrono::milliseconds min_runtime = job_manager::default_min_runtime,
      std::unique_ptr<store::database> writer = nullptr, std::string home_zone = "local");
  ~scheduler_logic() override;

  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override;
  // Forgets nodes that have been dead for a minute.
  void on_tick() override;

  // Datasets a job names are checked with `p` at submit (dataset_probe.hpp).
  void set_dataset_probe(dataset_probe p) { jobs_.set_dataset_probe(std::move(p)); }
  // Where stages may read files (job_manager::set_read_roots).
  void set_read_roots(std::vector<std::string> roots) { jobs_.set_read_roots(std::move(roots)); }
  // How a stage's final checkpoint is verified before it may succeed
  // (job_manager::set_checkpoint_check: the cloud's checkpoint key).
  void set_checkpoint_check(job_manager::checkpoint_check c) { jobs_.set_checkpoint_check(std::move(c)); }
  // The cloud's token key, which signs diloco stages' aggregation grants (job_manager::set_grant_key).
  void set_grant_key(std::string key) { jobs_.set_grant_key(std::move(key)); }
  // The edge sites registry (a cloud instance); without one the site requests
  // answer unimplemented. Each site event is told to `sink`.
  void set_sites(std::unique_ptr<site_registry> sites, site_sink sink);
  // The model registry: every stage that succeeds leaves a model version
  // (models/model_registry.hpp); without one the model requests answer unimplemented.
  void set_models(std::unique_ptr<model_registry> models);

  // Where on_tick publishes loom_scheduler_nodes_lost_total{zone,service}
  // (nodes reaped: dead a minute past their missed heartbeats) and, every 2 s,
  // loom_scheduler_site_link_down{site} (1 while `loom site list` shows the
  // enrolled site's link down): what LoomNodeDown and LoomSiteLinkDown read.
  void set_metrics(metrics::service_metrics* m) { metrics_ = m; }
  // Told the topic of every change a caller can see: "jobs" (a submit,
  // cancel, a trainer's progress), "roster" (a registration, drain, undrain,
  // and each node's alive / suspect / dead turn, found at the tick), "sites"
  // (a token, an enrolment, a revocation), "models" (a rollback). The service
  // publishes them (runtime::service_env::notify); nothing else is in them.
  void set_change_sink(std::function<void(std::string_view)> f) { changed_ = std::move(f); }

  const roster& nodes() const { return roster_; }
  const job_manager& jobs() const { return jobs_; }

 private:
  void publish_gauges(time_point now);
  void register_handlers();  // the table below: one line per request type
  // Async writes of one request (or tick): resolved when the last one is durable.
  struct pending_commit;
  void enqueue(job_manager::unit u);
  void finish_batch();  // the call made its last write: its ticket may resolve
  runtime::handled register_node(const loom::v1::RegisterNodeRequest& req, const runtime::call_context& ctx);
  runtime::handled heartbeat(const loom::v1::NodeHeartbeatRequest& req, const runtime::call_context& ctx);
  runtime::handled list_nodes(const loom::v1::ListNodesRequest& req);
  // Drain (or undrain) a node: the admin's, or its own site's (roster_binding.hpp: may_drain).
  runtime::handled set_drained(const std::string& id, const std::string& reason, bool drained,
                               const runtime::call_context& ctx);
  runtime::handled submit_job(const loom::v1::SubmitJobRequest& req, const runtime::call_context& ctx);
  runtime::handled list_jobs(const loom::v1::ListJobsRequest& req, const runtime::call_context& ctx);
  runtime::handled get_job(const loom::v1::GetJobRequest& req, const runtime::call_context& ctx);
  runtime::handled cancel_job(const loom::v1::CancelJobRequest& req, const runtime::call_context& ctx);
  runtime::handled poll_work(const loom::v1::PollWorkRequest& req, const runtime::call_context& ctx);
  // A node of zone `zone` may be spoken for by connection `peer`: an edge
  // site's keys only for nodes in the site's zone, and a site's zone only by
  // its keys (sites/site_handlers.cpp). permission_denied saying which.
  status zone_binding(const std::string& peer, const std::string& zone);
  // `peer` may speak for node `id` (zone, service): its binding's key, its
  // zone's keys (zone_binding); a node stored before bindings is bound to
  // `peer` now when the key fits its service. permission_denied naming who may.
  status speaks_for(const std::string& id, const std::string& zone, const std::string& service,
                    const std::string& peer);
  // Edge sites (sites/site_handlers.cpp).
  runtime::handled issue_site_token(const loom::v1::IssueSiteTokenRequest& req, const runtime::call_context& ctx);
  runtime::handled revoke_site(const loom::v1::RevokeSiteRequest& req, const runtime::call_context& ctx);
  runtime::handled list_sites(const loom::v1::ListSitesRequest& req);
  runtime::handled site_keys(const loom::v1::SiteKeysRequest& req, const runtime::call_context& ctx);
  runtime::handled enrol_site(const loom::v1::EnrolSiteRequest& req);
  void describe(const site_rec& s, loom::v1::SiteInfo* out) const;  // with its trainers from the roster
  // A site node's heartbeat report (link, datasets) into the registry; `peer` is its CURVE principal.
  void site_report(const loom::v1::NodeHeartbeatRequest& req, const std::string& peer);
  // The model registry (models/model_handlers.cpp).
  runtime::handled list_models(const loom::v1::ListModelsRequest& req, const runtime::call_context& ctx);
  runtime::handled get_model(const loom::v1::GetModelRequest& req, const runtime::call_context& ctx);
  runtime::handled diff_models(const loom::v1::DiffModelsRequest& req, const runtime::call_context& ctx);
  runtime::handled resolve_model_version(const loom::v1::ResolveModelVersionRequest& req,
                                         const runtime::call_context& ctx);
  runtime::handled rollback_model(const loom::v1::RollbackModelRequest& req, const runtime::call_context& ctx);
  runtime::handled record_model_export(const loom::v1::RecordModelExportRequest& req, const runtime::call_context& ctx);
  void describe(const model_version_rec& v, bool current, loom::v1::ModelVersion* out) const;
  // A job as the wire shows it, with each queued stage's reason to wait.
  void describe(const job_rec& j, loom::v1::JobInfo* out) const;
  // Runs fn in a store transaction (or succeeds at once without a store).
  status persist(const std::function<status(store::transaction&)>& fn);

  store::database* db_;
  clock_fn now_;
  roster roster_;
  std::function<void(std::string_view)> changed_;
  std::string roster_digest_;  // each node's id and state at the last tick: a change is published
  std::map<std::string, time_point> seen_;  // heartbeats not yet written
  std::set<std::string> heard_;             // nodes heard since this logic was made
  void heard_from(const std::string& id, time_point now);
  job_manager jobs_;
  std::shared_ptr<pending_commit> current_;  // of the call in progress
  // Jobs whose submit or cancel is not durable yet, by id: a repeat of that
  // request (answered from memory, `existed`) waits for the same commit, so
  // no reply ever names a job the store might still lose (a failover).
  std::map<std::string, std::weak_ptr<runtime::commit_ticket>> unsettled_;
  const runtime::call_context* call_ = nullptr;  // the request in progress (job events name it)
  std::mutex failure_mu_;
  std::optional<std::string> commit_failure_;  // set (once) by the committer thread
  std::unique_ptr<site_registry> sites_;  // null: not a cloud instance
  site_sink site_sink_;
  std::unique_ptr<model_registry> models_;  // null: no state store
  metrics::service_metrics* metrics_ = nullptr;
  time_point gauges_at_{};  // when publish_gauges last ran
  runtime::handler_table table_{"scheduler"};
  std::unique_ptr<store::group_commit> writer_;  // last: destroyed (flushed) first
};

}  // namespace loom::scheduler
