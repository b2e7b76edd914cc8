// Job events, bookkeeping and the scheduling pass. Node events live in
// nodes.cpp, reservation and make-room (shrink/evict what-ifs) in reservation.cpp.
#include "services/scheduler/policy/policy.hpp"

#include <algorithm>
#include <tuple>

namespace loom::scheduler::policy {

policy::policy(policy_config cfg) : cfg_(cfg) {}

void policy::set_tenant_weight(const std::string& tenant, double weight) {
  tenants_[tenant_index(tenant)].weight = weight > 0 ? weight : 1.0;
}

std::uint32_t policy::tenant_index(const std::string& name) {
  auto [it, fresh] = tenant_ids_.emplace(name, static_cast<std::uint32_t>(tenants_.size()));
  if (fresh) tenants_.push_back(tenant_rec{name, 1.0, {}});
  return it->second;
}

double policy::share_of(std::uint32_t t) const {
  const resources& cap = cluster_.capacity();
  const resources& u = tenants_[t].used;
  double s = 0;
  if (cap.gpus) s = std::max(s, double(u.gpus) / cap.gpus);
  if (cap.cpu_cores) s = std::max(s, double(u.cpu_cores) / cap.cpu_cores);
  if (cap.memory_bytes) s = std::max(s, double(u.memory_bytes) / double(cap.memory_bytes));
  return s / tenants_[t].weight;
}

double policy::share(const std::string& tenant) const {
  auto it = tenant_ids_.find(tenant);
  return it == tenant_ids_.end() ? 0.0 : share_of(it->second);
}

std::vector<std::uint32_t> policy::zones_of(const job_rec& j) const {
  if (!j.any_zone) return j.zones;
  std::vector<std::uint32_t> all(cluster_.zone_count());
  for (std::uint32_t z = 0; z < all.size(); ++z) all[z] = z;
  return all;
}

std::vector<node_id> policy::ids(const std::vector<std::uint32_t>& idx) const {
  std::vector<node_id> out;
  out.reserve(idx.size());
  for (auto i : idx) out.push_back(cluster_.node(i).id);
  return out;
}

// ---- events ---------------------------------------------------------------

result<policy::decisions> policy::submit(job_spec job, time_ms now) {
  auto j = submit_queued_only(std::move(job), now);
  if (!j) return j.err();
  decisions out;
  schedule(now, out);
  return out;
}

result<policy::decisions> policy::restore_running(job_spec job, const std::vector<node_id>& nodes, time_ms started,
                                                  time_ms now) {
  const std::string name = "job " + std::to_string(job.id);
  if (nodes.empty() || nodes.size() < job.min_members || nodes.size() > job.max_members)
    return make_error(errc::invalid_argument, name + ": restored with a member count outside min..max");
  std::vector<std::uint32_t> idx;
  std::optional<std::uint32_t> zone;
  resources need_per_node;
  for (node_id n : nodes) {
    auto i = cluster_.index_of(n);
    if (!i || !cluster_.node(*i).alive)
      return make_error(errc::invalid_argument, name + ": node " + std::to_string(n) + " is not present");
    if (zone && cluster_.node(*i).zone != *zone)
      return make_error(errc::invalid_argument, name + ": members in two zones");
    zone = cluster_.node(*i).zone;
    idx.push_back(*i);
  }
  for (std::uint32_t i : idx) {
    const auto k = static_cast<std::uint32_t>(std::count(idx.begin(), idx.end(), i));
    if (!fits_in(job.per_member * k, cluster_.node(i).free))
      return make_error(errc::invalid_argument, name + ": node " + std::to_string(cluster_.node(i).id) + " lacks room");
  }
  auto placed = submit_queued_only(std::move(job), now);
  if (!placed) return placed.err();
  start(**placed, *zone, idx, started);
  decisions out;
  schedule(now, out);
  return out;
}

status policy::check_new(const job_spec& job) const {
  if (job.min_members == 0 || job.max_members < job.min_members)
    return make_error(errc::invalid_argument, "job " + std::to_string(job.id) + ": need 1 <= min_members <= max_members");
  if (job.per_member == resources{})
    return make_error(errc::invalid_argument, "job " + std::to_string(job.id) + ": per_member resources are empty");
  if (jobs_.count(job.id)) return make_error(errc::already_exists, "job " + std::to_string(job.id) + " already submitted");
  return ok_status();
}

result<policy::job_rec*> policy::submit_queued_only(job_spec job, time_ms now, std::optional<std::uint64_t> seq) {
  if (auto st = check_new(job); !st) return st.err();
  job_rec r;
  r.tenant = tenant_index(job.tenant);
  r.any_zone = job.zones.empty();
  for (const auto& z : job.zones) r.zones.push_back(cluster_.intern_zone(z));
  std::sort(r.zones.begin(), r.zones.end());
  r.zones.erase(std::unique(r.zones.begin(), r.zones.end()), r.zones.end());
  resize_zones();
  r.seq = seq ? *seq : next_seq_++;
  r.prio_key = cfg_.priority_order ? job.priority : 0;
  r.tenant_key = cfg_.fair_share ? r.tenant : 0;
  r.submitted = now;
  r.min_size = cfg_.elastic ? job.min_members : job.max_members;
  r.max_size = job.max_members;
  r.spec = std::move(job);
  job_rec& j = jobs_.emplace(r.spec.id, std::move(r)).first->second;
  enqueue(j);
  return &j;
}

result<policy::decisions> policy::finish(job_id id, time_ms now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != job_state::running)
    return make_error(errc::not_found, "job " + std::to_string(id) + " is not running");
  stop(it->second);
  dequeue(it->second);
  jobs_.erase(it);
  decisions out;
  schedule(now, out);
  return out;
}

result<policy::decisions> policy::finish_and_submit(job_id id, job_spec next, time_ms now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != job_state::running)
    return make_error(errc::not_found, "job " + std::to_string(id) + " is not running");
  if (auto st = check_new(next); !st) return st.err();  // before anything changes
  const std::uint64_t seq = it->second.seq;
  stop(it->second);
  dequeue(it->second);
  jobs_.erase(it);
  (void)submit_queued_only(std::move(next), now, seq);  // checked above: cannot fail
  decisions out;
  schedule(now, out);
  return out;
}

result<policy::decisions> policy::cancel(job_id id, time_ms now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return make_error(errc::not_found, "job " + std::to_string(id) + " is unknown");
  if (it->second.state == job_state::running) stop(it->second);
  dequeue(it->second);
  if (holder_ == id) clear_reservation();
  jobs_.erase(it);
  decisions out;
  schedule(now, out);
  return out;
}

policy::decisions policy::tick(time_ms now) {
  decisions out;
  schedule(now, out);
  return out;
}

// ---- bookkeeping ----------------------------------------------------------

void policy::resize_zones() {
  std::size_t z = cluster_.zone_count();
  if (running_in_zone_.size() >= z) return;
  running_in_zone_.resize(z);
  elastic_in_zone_.resize(z);
  zone_borrowed_gpus_.resize(z, 0);
  zone_prio_gpus_.resize(z);
}

void policy::enqueue(job_rec& j) {
  j.state = job_state::queued;
  queue_[j.prio_key][j.tenant_key].emplace(j.seq, &j);
  ++queued_count_;
  if (j.spec.per_member.gpus == 0) ++queued_gpuless_;
}

void policy::dequeue(job_rec& j) {
  auto c = queue_.find(j.prio_key);
  if (c == queue_.end()) return;
  auto t = c->second.find(j.tenant_key);
  if (t == c->second.end()) return;
  std::size_t n = t->second.erase(j.seq);
  queued_count_ -= n;
  if (j.spec.per_member.gpus == 0) queued_gpuless_ -= n;
}

void policy::start(job_rec& j, std::uint32_t zone, const std::vector<std::uint32_t>& nodes, time_ms now) {
  dequeue(j);
  j.state = job_state::running;
  j.zone = zone;
  j.started = now;
  j.est_end = now + j.spec.estimated_runtime;
  j.members.clear();
  add_members(j, nodes);
  by_end_.emplace(j.est_end, j.spec.id);
  running_.insert(j.spec.id);
  running_in_zone_[zone].insert(j.spec.id);
  if (j.elastic()) {
    elastic_.emplace(-j.prio_key, j.seq, j.spec.id);
    elastic_in_zone_[zone].emplace(-j.prio_key, j.seq, j.spec.id);
  }
  // A new potential victim: an eviction that failed may succeed once it is old enough.
  if (j.spec.min_runtime <= 0) ++capacity_epoch_;
  else evict_retry_at_ = std::min(evict_retry_at_, now + j.spec.min_runtime);
}

void policy::add_members(job_rec& j, const std::vector<std::uint32_t>& nodes) {
  zone_borrowed_gpus_[j.zone] -= std::uint64_t(borrowed(j)) * j.spec.per_member.gpus;
  zone_prio_gpus_[j.zone][j.prio_key] += std::uint64_t(nodes.size()) * j.spec.per_member.gpus;
  for (auto n : nodes) {
    cluster_.take(n, j.spec.per_member);
    auto& on = cluster_.node(n).jobs;
    if (std::find(on.begin(), on.end(), j.spec.id) == on.end()) on.push_back(j.spec.id);
    j.members.push_back(n);
  }
  tenants_[j.tenant].used = tenants_[j.tenant].used + j.spec.per_member * static_cast<std::uint32_t>(nodes.size());
  zone_borrowed_gpus_[j.zone] += std::uint64_t(borrowed(j)) * j.spec.per_member.gpus;
}

void policy::drop_members(job_rec& j, std::size_t keep) {
  if (j.members.size() <= keep) return;
  zone_borrowed_gpus_[j.zone] -= std::uint64_t(borrowed(j)) * j.spec.per_member.gpus;
  zone_prio_gpus_[j.zone][j.prio_key] -= std::uint64_t(j.members.size() - keep) * j.spec.per_member.gpus;
  for (std::size_t i = keep; i < j.members.size(); ++i) cluster_.give(j.members[i], j.spec.per_member);
  std::uint32_t dropped = static_cast<std::uint32_t>(j.members.size() - keep);
  std::vector<std::uint32_t> gone(j.members.begin() + static_cast<std::ptrdiff_t>(keep), j.members.end());
  j.members.resize(keep);
  for (auto n : gone) {
    if (std::find(j.members.begin(), j.members.end(), n) != j.members.end()) continue;
    auto& on = cluster_.node(n).jobs;
    auto it = std::find(on.begin(), on.end(), j.spec.id);
    if (it != on.end()) on.erase(it);
  }
  tenants_[j.tenant].used = tenants_[j.tenant].used - j.spec.per_member * dropped;
  zone_borrowed_gpus_[j.zone] += std::uint64_t(borrowed(j)) * j.spec.per_member.gpus;
  ++capacity_epoch_;
}

void policy::stop(job_rec& j) {
  if (j.state != job_state::running) return;
  drop_members(j, 0);
  by_end_.erase({j.est_end, j.spec.id});
  running_.erase(j.spec.id);
  running_in_zone_[j.zone].erase(j.spec.id);
  elastic_.erase({-j.prio_key, j.seq, j.spec.id});
  elastic_in_zone_[j.zone].erase({-j.prio_key, j.seq, j.spec.id});
  enqueue(j);
}

// ---- queries ----------------------------------------------------------------

std::optional<job_view> policy::find(job_id id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  const job_rec& j = it->second;
  return job_view{&j.spec, j.state, j.submitted, j.started, ids(j.members)};
}

std::optional<std::pair<job_id, time_ms>> policy::reservation() const {
  if (!holder_) return std::nullopt;
  return std::make_pair(*holder_, shadow_);
}

bool policy::fits_now(const job_spec& job) const {
  std::uint32_t need = cfg_.elastic ? job.min_members : job.max_members;
  std::vector<std::uint32_t> zones;
  if (job.zones.empty()) {
    for (std::uint32_t z = 0; z < cluster_.zone_count(); ++z) zones.push_back(z);
  } else {
    for (const auto& name : job.zones)
      if (auto z = cluster_.find_zone(name)) zones.push_back(*z);
  }
  std::vector<std::uint32_t> scratch;
  for (auto z : zones) {
    if (cluster_.gpu_bound(z, job.per_member) < need) continue;
    scratch.clear();
    if (cluster_.pick(z, job.per_member, need, [&](std::uint32_t n) { return cluster_.node(n).free; }, scratch) >= need)
      return true;
  }
  return false;
}

// ---- the scheduling pass ----------------------------------------------------

resources policy::cap(std::uint32_t idx, fit_mode mode) const {
  const resources& f = cluster_.node(idx).free;
  if (mode == fit_mode::long_fill && in_plan_[idx]) return min_of(f, slack_[idx]);
  return f;
}

bool policy::try_place(job_rec& j, fit_mode mode, time_ms now, decisions& out, reason why) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> order;  // (zone free gpus, zone)
  auto consider = [&](std::uint32_t z) {
    if (cluster_.gpu_bound(z, j.spec.per_member) >= j.min_size) order.emplace_back(cluster_.zone(z).free.gpus, z);
  };
  if (j.any_zone) {
    for (std::uint32_t z = 0; z < cluster_.zone_count(); ++z) consider(z);
  } else {
    for (auto z : j.zones) consider(z);
  }
  std::sort(order.begin(), order.end());  // best-fit zone: the fullest that may fit
  for (auto [f, z] : order)
    if (place_in(j, z, mode, now, out, why)) return true;
  return false;
}

bool policy::place_in(job_rec& j, std::uint32_t z, fit_mode mode, time_ms now, decisions& out, reason why) {
  const resources& pm = j.spec.per_member;
  std::vector<std::uint32_t> picked;
  std::uint32_t got = cluster_.pick(z, pm, j.max_size, [&](std::uint32_t n) { return cap(n, mode); }, picked);
  if (got < j.min_size) return false;
  start(j, z, picked, now);
  if (mode == fit_mode::long_fill)
    for (auto n : picked)
      if (in_plan_[n]) slack_[n] = slack_[n] - pm;
  out.push_back({action::place, j.spec.id, ids(picked), got, false, why, 0});
  return true;
}

void policy::grow_elastic(time_ms now, decisions& out) {
  (void)now;
  if (elastic_.empty()) return;
  int holder_prio = holder_ ? jobs_.at(*holder_).prio_key : 0;
  std::vector<std::uint32_t> picked;
  for (const auto& [neg_prio, seq, id] : elastic_) {
    job_rec& e = jobs_.at(id);
    if (e.members.size() >= e.max_size) continue;
    if (cluster_.zone(e.zone).free.gpus < e.spec.per_member.gpus) continue;
    // Growth of a job the holder may not reclaim must leave the reservation intact.
    fit_mode mode = (holder_ && shadow_ != never && e.prio_key > holder_prio) ? fit_mode::long_fill : fit_mode::now;
    picked.clear();
    std::uint32_t want = e.max_size - static_cast<std::uint32_t>(e.members.size());
    if (cluster_.pick(e.zone, e.spec.per_member, want, [&](std::uint32_t n) { return cap(n, mode); }, picked) == 0)
      continue;
    add_members(e, picked);
    if (mode == fit_mode::long_fill)
      for (auto n : picked)
        if (in_plan_[n]) slack_[n] = slack_[n] - e.spec.per_member;
    out.push_back({action::grow, id, ids(picked), static_cast<std::uint32_t>(e.members.size()), false, reason::idle_capacity, 0});
  }
}

void policy::schedule(time_ms now, decisions& out) {
  if (holder_ && !jobs_.count(*holder_)) clear_reservation();
  // Shapes that failed to backfill this pass: a job needing at least as much, in the
  // same zones and mode, with no higher priority (so no more to reclaim), fails too.
  struct failed {
    resources per;
    std::uint32_t members;
    const job_rec* like;
    int prio;
    fit_mode mode;
  };
  std::vector<failed> fails;
  auto dominated = [&](const job_rec& j, fit_mode mode) {
    for (const auto& f : fails)
      if (f.mode == mode && j.prio_key <= f.prio && j.min_size >= f.members && fits_in(f.per, j.spec.per_member) &&
          j.any_zone == f.like->any_zone && j.zones == f.like->zones)
        return true;
    return false;
  };
  struct cursor {
    tenant_q* q;
    tenant_q::iterator it;
    std::uint32_t tenant;
    double share;
  };
  std::size_t seen_decisions = out.size();
  auto refresh = [&](std::vector<cursor>& cs) {  // shares move only when a decision was made
    if (out.size() == seen_decisions) return;
    seen_decisions = out.size();
    for (auto& c : cs) c.share = cfg_.fair_share ? share_of(c.tenant) : 0.0;
  };
  std::vector<cursor> cur;
  bool blocked = false, done = false;
  std::uint32_t scanned = 0, misses = 0;
  for (auto cit = queue_.begin(); cit != queue_.end() && !done; ++cit) {
    cur.clear();
    for (auto& [t, q] : cit->second)
      if (!q.empty()) cur.push_back({&q, q.begin(), t, cfg_.fair_share ? share_of(t) : 0.0});
    if (cur.empty()) continue;
    job_rec* first = nullptr;  // the holder goes first in its class (rule 4: it keeps its place)
    if (holder_) {
      job_rec& h = jobs_.at(*holder_);
      if (h.prio_key == cit->first) {
        first = &h;
        for (auto& c : cur)
          if (c.it != c.q->end() && c.it->second == &h) ++c.it;
      }
    }
    auto next = [&]() -> job_rec* {
      if (first) return std::exchange(first, nullptr);
      refresh(cur);
      for (;;) {
        cursor* best = nullptr;
        for (auto& c : cur) {
          if (c.it == c.q->end()) continue;
          if (!best || c.share < best->share || (c.share == best->share && c.it->first < best->it->first)) best = &c;
        }
        if (!best) return nullptr;
        job_rec* j = (best->it++)->second;
        if (holder_ && j->spec.id == *holder_) continue;
        return j;
      }
    };
    while (job_rec* j = next()) {
      if (++scanned > cfg_.scan_limit) {
        done = true;
        break;
      }
      if (!blocked) {
        bool is_holder = holder_ && *holder_ == j->spec.id;
        if (try_place(*j, fit_mode::now, now, out, reason::fits) ||
            (cfg_.elastic && try_make_room(*j, fit_mode::now, false, now, out)) ||
            (cfg_.preemption && try_make_room(*j, fit_mode::now, true, now, out))) {
          if (is_holder) clear_reservation();
          else if (holder_) plan_dirty_ = true;  // a job ahead of the holder took capacity
          continue;
        }
        if (!cfg_.backfill) {
          done = true;  // strict FIFO: nothing passes the head
          break;
        }
        if (!is_holder) {
          clear_reservation();
          holder_ = j->spec.id;
        }
        if (cfg_.reserve) ensure_reservation(*j, now);
        blocked = true;
        continue;
      }
      if (cluster_.free().gpus == 0 && queued_gpuless_ == 0 && !has_borrowed()) {
        done = true;  // nothing left to backfill into
        break;
      }
      fit_mode mode = fit_mode::short_fill;
      if (cfg_.reserve && shadow_ != never && now + j->spec.estimated_runtime > shadow_) mode = fit_mode::long_fill;
      if (++misses > cfg_.backfill_give_up) {
        done = true;
        break;
      }
      if (dominated(*j, mode)) continue;
      if (try_place(*j, mode, now, out, reason::backfill) ||
          (cfg_.elastic && try_make_room(*j, mode, false, now, out))) {
        misses = 0;
        continue;
      }
      if (fails.size() < 64) fails.push_back({j->spec.per_member, j->min_size, j, j->prio_key, mode});
    }
  }
  if (cfg_.elastic) grow_elastic(now, out);
}

}  // namespace loom::scheduler::policy
