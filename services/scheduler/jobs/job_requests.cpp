// job_manager's requests from clients: submit (resolve, admit, store, queue),
// cancel, and what a caller may see — jobs of its tenant (every tenant for an
// admin), request ids per principal, why a queued stage waits.
#include "services/scheduler/jobs/job_manager.hpp"

#include "libs/files/confine.hpp"
#include "libs/runspec/input_files.hpp"
#include "libs/runspec/job_template.hpp"

#include <filesystem>
#include <set>

namespace loom::scheduler {
namespace {

// The override that named dataset `name` for `stage`, as the submitter wrote
// it ("--set sft.data.dataset=x"); "" when the template itself named it.
std::string override_naming(const std::vector<std::string>& overrides, const std::string& stage,
                            const std::string& name) {
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
    const auto eq = it->find('=');
    if (eq == std::string::npos || it->substr(eq + 1) != name) continue;
    const std::string key = it->substr(0, eq);
    if (key == "dataset" || key == "data.dataset" || key == stage + ".dataset" || key == stage + ".data.dataset")
      return "--set " + *it;
  }
  return "";
}

// The job a path under the jobs root lies in ("job-000003" for
// <root>/job-000003/pretrain/checkpoints): "" outside the root, "." for the root itself.
std::string job_of(const std::string& root, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string r = fs::weakly_canonical(root, ec).string();
  if (ec) return "";
  const std::string p = fs::weakly_canonical(path, ec).string();
  if (ec || !files::within(r, p)) return "";
  if (p.size() == r.size()) return ".";
  const std::string rest = p.substr(r == "/" ? 1 : r.size() + 1);
  return rest.substr(0, rest.find('/'));
}

std::string job_id_of(std::uint64_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "job-%06llu", static_cast<unsigned long long>(seq));
  return buf;
}

}  // namespace

result<const request_rec*> job_manager::seen_request(const caller& who, const std::string& kind) const {
  auto it = by_request_.find(request_key(who.principal, who.request_id));
  if (it == by_request_.end()) return static_cast<const request_rec*>(nullptr);
  const request_rec& r = it->second;
  if (r.kind != kind || (!r.body_sha256.empty() && r.body_sha256 != who.body_sha256))
    return make_error(errc::conflict, "request id " + who.request_id + " was used by " + who.principal + " for " +
                                          (r.kind == "submit" ? "submitting " : "cancelling ") + r.job_id +
                                          " with another request: use a new request id");
  return &r;
}

result<std::pair<const job_rec*, bool>> job_manager::submit(const submit_args& a, const caller& who,
                                                            const roster& nodes, time_point now) {
  if (who.request_id.empty()) return make_error(errc::invalid_argument, "SubmitJob: the request id is empty");
  auto seen = seen_request(who, "submit");
  if (!seen) return seen.err();
  if (*seen) return std::pair<const job_rec*, bool>{&jobs_.at((*seen)->job_id), true};
  if (a.template_toml.empty()) return make_error(errc::invalid_argument, "SubmitJob: the template text is empty");
  if (a.template_toml.size() > runspec::max_template_bytes)  // refused before it is parsed (job_template.hpp)
    return make_error(errc::invalid_argument, "SubmitJob: the template text is " +
                                                  std::to_string(a.template_toml.size()) + " bytes; a template is at "
                                                  "most 1 MiB (a page of TOML: the shipped ones are under 2 KiB)");
  const std::string tenant = a.tenant.empty() ? who.tenant : a.tenant;
  if (tenant != who.tenant && !who.admin())
    return make_error(errc::permission_denied, "tenant " + tenant + ": a " + who.role + " of tenant " + who.tenant +
                                                   " submits only within it (admins act across tenants)");
  auto plan = templates_.resolve(a.template_name, a.template_toml, a.overrides);
  if (!plan) return plan.err();
  // A job that names no zone runs in the scheduler's own: never on an edge
  // site's trainers (they would train on the site's data, their checkpoint
  // stays at the site).
  const std::string home = who.service_zone.empty() ? home_zone_ : who.service_zone;
  const std::string zone = a.zone.empty() ? home : a.zone;
  std::set<std::string> zones{home};
  for (const auto& [id, n] : nodes.all()) zones.insert(n.zone);
  if (auto st = admit(*plan, zone, zones, trainers(nodes, now)); !st) return st.err();
  if (auto st = sites_.check(*plan); !st) return st.err();
  if (!read_roots_.empty())  // every path value of every stage, found by its type (runspec/input_files.hpp)
    for (const auto& sp : plan->stages)
      if (auto st = runspec::check_inputs(read_roots_, sp.spec.input_paths(), "stage " + sp.name + ": "); !st)
        return make_error(st.code() == errc::permission_denied ? errc::permission_denied : errc::invalid_argument,
                          st.err().message);
  // The job outputs are one root for every tenant: a path there must lie in
  // a job of the submitting tenant (an admin's may read any); another
  // tenant's job answers as a missing one would (its existence not disclosed).
  for (const auto& sp : plan->stages)
    for (const auto& [key, path] : sp.spec.input_paths()) {
      const std::string owner = job_of(root_, path);
      if (owner.empty() || who.admin()) continue;
      const job_rec* o = find(owner);
      if (!o || o->tenant != tenant)
        return make_error(errc::not_found, "stage " + sp.name + ": " + key + " " + path + ": no job " + owner +
                                               " in tenant " + tenant +
                                               " (a stage reads the job outputs of its own tenant only)");
    }
  // A job for an edge site's zone reads its data at the site: its trainer
  // checks the dataset there (the cloud's ingest never holds it).
  if (probe_ && !sites_.enrolled_site(zone)) {
    std::set<std::string> asked;
    for (const auto& sp : plan->stages)
      // An edge-site stage's data lives at its sites: their trainers check it there (the cloud never sees it).
      if (!sp.spec.dataset.empty() && sp.spec.diloco.site_names.empty() && asked.insert(sp.spec.dataset).second)
        if (auto st = probe_(tenant, sp.spec.dataset); !st) {
          const std::string by = override_naming(a.overrides, sp.name, sp.spec.dataset);
          return make_error(st.code(), (by.empty() ? "stage " + sp.name : by) + ": " + st.err().message);
        }
  }
  job_rec j;
  j.seq = next_seq_;
  j.id = job_id_of(j.seq);
  j.request_id = request_key(who.principal, who.request_id);
  j.name = plan->name;
  j.template_name = a.template_name;
  j.priority_class = a.priority_class.empty() ? plan->priority_class : a.priority_class;
  if (runspec::priority_of(j.priority_class) < 0)
    return make_error(errc::invalid_argument, "priority class " + j.priority_class + ": use low, normal or high");
  j.tenant = tenant;
  j.zone = zone;
  j.principal = who.principal;
  j.out_dir = root_ + "/" + j.id;
  j.overrides = a.overrides;
  j.submitted_ns = j.updated_ns = ns(now);
  j.body_sha256 = who.body_sha256;
  for (const auto& sp : plan->stages) {
    stage_rec s;
    s.name = sp.name;
    s.config_toml = sp.config_toml;
    s.total_steps = sp.total_steps;  // an hpo stage: its sweep, as its step counts granted steps
    s.min_trainers = sp.spec.min_trainers;
    s.max_trainers = sp.spec.max_trainers;
    s.memory_bytes = sp.sizing.memory().total();  // an hpo stage's largest trial; after one, the largest values
    j.stages.push_back(std::move(s));
  }
  j.stages[0].state = "queued";
  std::string names;
  for (const auto& s : j.stages) names += (names.empty() ? "" : " -> ") + s.name;
  const request_rec req{who.principal, who.request_id, "submit", who.body_sha256, j.id, ns(now)};
  auto st = persist([j, e = job_event{1, ns(now), "", "submitted",
                                            "template " + a.template_name + ", stages " + names + ", by " +
                                                who.principal + " (tenant " + tenant + ")"}](
                        store::transaction& tx) -> status {
    if (auto s = save_job(tx, j); !s) return s;  // the row is also the request's record
    return add_event(tx, j.id, e);
  });
  if (!st) return st.err();
  j.next_event = 2;
  ++next_seq_;
  const std::string id = j.id;
  by_request_[request_key(who.principal, who.request_id)] = req;
  job_rec& stored = jobs_[id] = std::move(j);
  for (std::size_t i = 0; i < stored.stages.size(); ++i) by_pid_[pid_of(stored, i)] = {id, i};
  queue_stage(stored, 0, std::nullopt, now);
  sites_.place(*this, nodes, now);
  return std::pair<const job_rec*, bool>{&stored, false};
}

result<const job_rec*> job_manager::cancel(const std::string& id, const std::string& reason, const caller& who,
                                           time_point now) {
  auto found = find_for(id, who);
  if (!found) return found.err();
  if (!who.admin() && who.role != "operator")
    return make_error(errc::permission_denied, "cancelling " + id + " needs the operator or admin role");
  auto seen = seen_request(who, "cancel");
  if (!seen) return seen.err();
  if (*seen) {
    if ((*seen)->job_id != id)
      return make_error(errc::conflict, "request id " + who.request_id + " cancelled " + (*seen)->job_id + ", not " + id);
    return *found;  // a retry: what the first cancel left
  }
  job_rec& j = jobs_.at(id);
  if (j.terminal()) return make_error(errc::conflict, "job " + id + " is already " + j.state);
  // What the policy placed on the room the cancel freed: applied once the job
  // is cancelled (dropped, a queued job would wait for the next change of the
  // roster while the policy took it for running).
  std::vector<policy::policy::decisions> freed;
  for (std::size_t i = 0; i < j.stages.size(); ++i) {
    stage_rec& s = j.stages[i];
    if (s.state == "running" || s.state == "queued") {
      clear_members(j, i);  // the trainers' next polls are told to stop
      if (auto d = policy_.cancel(pid_of(j, i), ms(now)); d) freed.push_back(std::move(*d));
      (void)hpo_.stop(*this, j.id, i, now);  // an hpo stage's trials, likewise
    }
    if (s.state != "succeeded" && s.state != "failed") s.state = "cancelled";
  }
  j.state = "cancelled";
  j.message = reason.empty() ? "cancelled" : reason;
  if (!who.request_id.empty()) {
    const request_rec req{who.principal, who.request_id, "cancel", who.body_sha256, id, ns(now)};
    if (auto st = persist([req](store::transaction& tx) { return add_request(tx, req); }); !st) return st.err();
    by_request_[request_key(who.principal, who.request_id)] = req;
  }
  if (auto st = record(j, "", "cancelled", j.message + " (by " + who.principal + ")", now); !st) return st.err();
  for (const auto& d : freed) apply(d, now);
  apply(policy_.tick(ms(now)), now);
  return &j;
}

std::vector<const job_rec*> job_manager::list(const std::string& state, const caller& who) const {
  std::vector<const job_rec*> out;
  for (const auto& [id, j] : jobs_)
    if ((state.empty() || j.state == state) && (who.admin() || j.tenant == who.tenant)) out.push_back(&j);
  return out;
}

const job_rec* job_manager::find(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

result<const job_rec*> job_manager::find_for(const std::string& id, const caller& who) const {
  const job_rec* j = find(id);
  if (!j || (!who.admin() && j->tenant != who.tenant))  // another tenant's job is not even shown to exist
    return make_error(errc::not_found, "no job " + id + " in tenant " + who.tenant);
  return j;
}

std::vector<trainer_view> job_manager::trainers(const roster& nodes, time_point now) const {
  std::vector<trainer_view> out;
  for (const auto& [id, n] : nodes.all()) {
    if (n.service != "trainer") continue;
    trainer_view t{n.id, n.zone, n.resources.cpu_cores, n.resources.memory_bytes,
                   nodes.state(n, now) != node_state::dead, n.draining, ""};
    if (auto sl = slots_.find(n.id); sl != slots_.end()) t.running = sl->second.job + "/" + jobs_.at(sl->second.job).stages[sl->second.stage].name;
    out.push_back(std::move(t));
  }
  return out;
}

std::string job_manager::waiting(const job_rec& j, std::size_t i, const roster& nodes, time_point now) const {
  const stage_rec& s = j.stages[i];
  if (s.state != "queued") return "";
  if (sites_.is_site_stage(j, i)) return sites_.waiting(*this, j, i, nodes, now);
  return waiting_reason(zone_of(j), s.min_trainers, s.memory_bytes, trainers(nodes, now));
}

void job_manager::site_revoked(const std::string& site, const std::string& reason, time_point now) {
  sites_.revoked(*this, site, reason, now);
}

}  // namespace loom::scheduler
