// check_invariants: recomputes usage from the allocations, independently of the
// incremental index, and checks every structural invariant. For tests.
#include "services/scheduler/policy/policy.hpp"

#include <algorithm>
#include <map>

namespace loom::scheduler::policy {

status policy::check_invariants() const {
  auto fail = [](std::string m) { return status(make_error(errc::internal, std::move(m))); };
  std::vector<resources> used(cluster_.size());
  std::vector<std::vector<job_id>> on(cluster_.size());
  std::vector<resources> tenant_used(tenants_.size());
  std::size_t queued = 0;
  std::vector<std::uint64_t> borrowed_gpus(cluster_.zone_count(), 0);
  std::vector<std::map<int, std::uint64_t>> prio_gpus(cluster_.zone_count());
  std::vector<job_id> keys;
  for (const auto& [id, j] : jobs_) keys.push_back(id);
  std::sort(keys.begin(), keys.end());
  for (job_id id : keys) {
    const job_rec& j = jobs_.at(id);
    const std::string name = "job " + std::to_string(id);
    if (j.state == job_state::queued) {
      ++queued;
      if (!j.members.empty()) return fail(name + " is queued but holds members");
      auto c = queue_.find(j.prio_key);
      if (c == queue_.end() || !c->second.count(j.tenant_key) || !c->second.at(j.tenant_key).count(j.seq) ||
          c->second.at(j.tenant_key).at(j.seq) != &j)
        return fail(name + " is queued but not in the queue");
      if (running_.count(id)) return fail(name + " is queued and running");
      continue;
    }
    std::size_t size = j.members.size();
    if (size < j.min_size || size > j.max_size)
      return fail(name + " holds " + std::to_string(size) + " members outside " + std::to_string(j.min_size) + ".." +
                  std::to_string(j.max_size));
    if (!running_.count(id) || !by_end_.count({j.est_end, id}) || !running_in_zone_[j.zone].count(id))
      return fail(name + " is running but missing from an index");
    for (auto n : j.members) {
      if (!cluster_.node(n).alive) return fail(name + " has a member on a removed node");
      if (cluster_.node(n).zone != j.zone) return fail(name + " spans zones");
      used[n] = used[n] + j.spec.per_member;
      if (std::find(on[n].begin(), on[n].end(), id) == on[n].end()) on[n].push_back(id);
    }
    borrowed_gpus[j.zone] += std::uint64_t(borrowed(j)) * j.spec.per_member.gpus;
    prio_gpus[j.zone][j.prio_key] += std::uint64_t(size) * j.spec.per_member.gpus;
    tenant_used[j.tenant] = tenant_used[j.tenant] + j.spec.per_member * static_cast<std::uint32_t>(size);
  }
  if (queued != queued_count_) return fail("queued count is off");
  if (running_.size() + queued != jobs_.size()) return fail("running index is off");
  resources total_free;
  for (std::uint32_t n = 0; n < cluster_.size(); ++n) {
    const auto& r = cluster_.node(n);
    const std::string name = "node " + std::to_string(r.id);
    if (!r.alive) {
      if (!(used[n] == resources{})) return fail(name + " is removed but holds members");
      continue;
    }
    if (!fits_in(used[n], r.capacity)) return fail(name + " is over-allocated");
    if (!(r.free == r.capacity - used[n])) return fail(name + " free capacity is off");
    auto a = on[n], b = r.jobs;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) return fail(name + " job list is off");
    if (r.cordoned) {
      for (const auto& b : cluster_.zone(r.zone).buckets)
        if (std::find(b.begin(), b.end(), n) != b.end()) return fail(name + " is cordoned but placeable");
    } else {
      const auto& bucket = cluster_.zone(r.zone).buckets.at(r.free.gpus);
      if (r.pos >= bucket.size() || bucket[r.pos] != n) return fail(name + " is misplaced in its bucket");
    }
    total_free = total_free + r.free;
  }
  for (std::uint32_t z = 0; z < cluster_.zone_count(); ++z) {
    if (borrowed_gpus[z] != zone_borrowed_gpus_[z]) return fail("borrowed GPUs of zone " + cluster_.zone(z).name + " are off");
    for (const auto& [prio, g] : zone_prio_gpus_[z])
      if (g != (prio_gpus[z].count(prio) ? prio_gpus[z].at(prio) : 0)) return fail("per-priority GPUs are off");
  }
  if (!(total_free == cluster_.free())) return fail("cluster free capacity is off");
  for (std::size_t t = 0; t < tenants_.size(); ++t)
    if (!(tenant_used[t] == tenants_[t].used)) return fail("usage of tenant " + tenants_[t].name + " is off");
  if (holder_ && (!jobs_.count(*holder_) || jobs_.at(*holder_).state != job_state::queued))
    return fail("the reservation holder is not queued");
  return ok_status();
}

}  // namespace loom::scheduler::policy
