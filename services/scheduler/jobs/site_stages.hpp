// site_stages: the job manager's owner of edge-site stages (issue 15) — a
// diloco stage whose [diloco] names sites (sites = ["north", "south"]) has
// member r on a trainer of zone sites[r]. The policy places a gang inside one
// zone, so these stages are placed here instead, outside it, and the
// trainers holding their members are cordoned in the policy. Once placed,
// the members speak the group protocol of policy_stages (job_groups.cpp).
// At submit every named site must be enrolled (check); a revoked site fails
// the stages that name it. Own state: the sites' states (a callback), the
// revoked sites, each stage's site names (parsed once). Shared state:
// jobs_context, handed in by the job manager with each call. Runs on the
// scheduler actor.
#pragma once

#include "libs/runspec/job_template.hpp"
#include "libs/status/status.hpp"
#include "services/scheduler/jobs/jobs_context.hpp"
#include "services/scheduler/jobs/trainer_poll.hpp"
#include "services/scheduler/roster.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace loom::scheduler {

class site_stages {
 public:
  // The edge sites by name with their state (pending, enrolled, revoked).
  using site_states = std::function<result<std::map<std::string, std::string>>()>;
  void set_site_states(site_states fn) { site_states_ = std::move(fn); }

  // Stage i's sites (diloco.sites names); empty: not an edge-site stage.
  const std::vector<std::string>& zones(const job_rec& j, std::size_t stage) const;
  bool is_site_stage(const job_rec& j, std::size_t stage) const { return !zones(j, stage).empty(); }
  // A diloco stage's sites at submit: each must be enrolled. Unset states: not checked.
  status check(const runspec::job_plan& plan) const;
  // Whether `zone` is an enrolled edge site's (a job placed there reads its data at the site).
  bool enrolled_site(const std::string& zone) const;
  // `node` runs a member of an edge-site stage (the policy keeps it cordoned).
  bool held(const jobs_context& cx, const std::string& node) const;
  // Places queued site stages once every site has a free trainer; re-places
  // a running stage's lost members inside their own site (each tick, each submit).
  void place(jobs_context& cx, const roster& nodes, time_point now);
  // The scheduler restarted while stage i ran: its members' slots again
  // (lost ones are re-placed by place()).
  void reattach(jobs_context& cx, job_rec& j, std::size_t i, time_point now);
  // A trainer running its member of an edge-site stage that has no slot here
  // (the scheduler restarted): its slot again, as running. False: not one.
  bool readopt(jobs_context& cx, const poll_report& r, time_point now);
  // Site `site` was revoked: every queued or running stage naming it fails.
  void revoked(jobs_context& cx, const std::string& site, const std::string& reason, time_point now);
  // Why queued stage i waits ("placing it..." or the sites with no free trainer).
  std::string waiting(const jobs_context& cx, const job_rec& j, std::size_t i, const roster& nodes,
                      time_point now) const;

 private:
  // A queued or running stage that names a revoked site fails: true when it did.
  bool fail_if_revoked(jobs_context& cx, job_rec& j, std::size_t i, time_point now);
  std::string free_trainer(const jobs_context& cx, const roster& nodes, const std::string& zone,
                           const std::string& prefer, time_point now) const;
  void hold(jobs_context& cx, const std::string& node, const std::string& job, std::size_t stage, std::uint32_t rank,
            time_point now);

  site_states site_states_;
  std::map<std::string, std::string> revoked_sites_;  // site -> the revocation's reason
  mutable std::map<std::string, std::vector<std::string>> zones_;  // "<job>/<stage>" -> diloco.sites names
};

}  // namespace loom::scheduler
