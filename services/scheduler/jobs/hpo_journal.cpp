// hpo_stages' journal (hpo_stage.hpp): a search's state saved with its stage
// (the ASHA journal of segments and results, each trial's checkpoint, node
// and attempt, the segments placed), and replayed when a new scheduler loads
// the job, so a search survives a scheduler restart (found by the chaos
// harness, issue 32): running segments are re-attached, the rest re-queued
// past an attempt fence, and a segment never resumes past its rung.
#include "services/scheduler/jobs/hpo_stage.hpp"

#include "libs/runspec/run_config.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace loom::scheduler {
namespace {

// A resumed search's new segments take attempt numbers this far past the
// last stored one: the lost scheduler may have handed out a few more before
// its store write landed, and a trainer still holding one of those must never
// be mistaken for the new segment (its reports are refused, it is stopped).
constexpr std::uint32_t attempt_fence = 16;

}  // namespace

bool hpo_stages::reload(jobs_context& cx, job_rec& j, std::size_t i, time_point now) {
  stage_rec& s = j.stages[i];
  if (s.state == "queued") {
    start(cx, j, i, now);
    return false;
  }
  std::string why;
  if (resume(cx, j, i, now, &why)) return false;
  // Its trials' directories stay for inspection.
  searches_.erase(search_key(j.id, i));
  cancel_trials(cx, j.id, now);
  s.state = "failed";
  s.finished_ns = cx.ns(now);
  s.hpo_search.clear();
  j.state = "failed";
  j.message = "stage " + s.name + ": the scheduler restarted during its hpo search, which cannot resume: " + why +
              "; submit the job again";
  for (std::size_t k = i + 1; k < j.stages.size(); ++k) j.stages[k].state = "cancelled";
  (void)cx.record(j, s.name, "stage_failed", j.message, now);
  return true;
}

std::string hpo_stages::encode(const std::string& job, std::size_t i) const {
  const search_state& st = searches_.at(search_key(job, i));
  nlohmann::json journal = nlohmann::json::array();
  for (const hpo_entry& e : st.search.journal()) {
    if (e.what == hpo_entry::kind::segment)
      journal.push_back({"s", e.trial, e.from, e.to});
    else if (std::isfinite(e.loss))
      journal.push_back({"r", e.trial, e.to, e.loss});
    else
      journal.push_back({"r", e.trial, e.to, nullptr});  // failed: no loss
  }
  nlohmann::json trials = nlohmann::json::array();
  for (std::size_t t = 0; t < st.checkpoints.size(); ++t)
    trials.push_back({{"checkpoint", st.checkpoints[t]}, {"node", st.nodes[t]}, {"attempt", st.attempts[t]}});
  nlohmann::json placed = nlohmann::json::array();
  for (const auto& [pid, t] : trials_)
    if (t.job == job && t.stage == i && !t.node.empty())
      placed.push_back({{"trial", t.seg.trial}, {"node", t.node}, {"attempt", t.attempts}});
  return nlohmann::json{{"v", 1}, {"journal", journal}, {"trials", trials}, {"placed", placed}}.dump();
}

void hpo_stages::save(jobs_context& cx, job_rec& j, std::size_t i) const {
  if (!searches_.count(search_key(j.id, i))) return;  // ended: stage_done stored the stage
  j.stages[i].hpo_search = encode(j.id, i);
  (void)cx.persist([row = j, i](store::transaction& tx) { return save_stage(tx, row, i); });
}

bool hpo_stages::resume(jobs_context& cx, job_rec& j, std::size_t i, time_point now, std::string* why) {
  stage_rec& s = j.stages[i];
  if (s.hpo_search.empty()) {
    *why = "its search state was not stored (a row from before schema v14)";
    return false;
  }
  // The stored state, read strictly: a field missing or of the wrong type names itself.
  std::vector<hpo_entry> journal;
  std::vector<std::string> checkpoints, nodes;
  std::vector<std::uint32_t> attempts;
  std::map<int, std::pair<std::string, std::uint32_t>> placed;  // trial -> node, attempt
  auto doc = nlohmann::json::parse(s.hpo_search, nullptr, false);
  try {
    if (!doc.is_object()) throw std::runtime_error("not a JSON object");
    if (doc.at("v").get<int>() != 1) throw std::runtime_error("version " + doc.at("v").dump() + " is not 1");
    for (const auto& e : doc.at("journal")) {
      const std::string k = e.at(0).get<std::string>();
      if (k == "s")
        journal.push_back(
            {hpo_entry::kind::segment, e.at(1).get<int>(), e.at(2).get<std::int64_t>(), e.at(3).get<std::int64_t>(), 0});
      else if (k == "r")
        journal.push_back({hpo_entry::kind::report, e.at(1).get<int>(), 0, e.at(2).get<std::int64_t>(),
                           e.at(3).is_null() ? std::numeric_limits<double>::quiet_NaN() : e.at(3).get<double>()});
      else
        throw std::runtime_error("journal entry kind \"" + k + "\" is neither s nor r");
    }
    for (const auto& t : doc.at("trials")) {
      checkpoints.push_back(t.at("checkpoint").get<std::string>());
      nodes.push_back(t.at("node").get<std::string>());
      attempts.push_back(t.at("attempt").get<std::uint32_t>());
    }
    for (const auto& p : doc.at("placed"))
      placed[p.at("trial").get<int>()] = {p.at("node").get<std::string>(), p.at("attempt").get<std::uint32_t>()};
  } catch (const std::exception& e) {
    *why = std::string("its stored search state does not read: ") + e.what();
    return false;
  }
  auto spec = runspec::parse_run_config(s.config_toml, j.id + "/" + s.name, {"model.init_from=\"/x\""});
  auto made = spec ? hpo_search::resume(s.config_toml, *spec, journal) : result<hpo_search>(spec.err());
  if (!made) {
    *why = made.err().message;
    return false;
  }
  if (checkpoints.size() != made->trials()) {
    *why = "its stored search state lists " + std::to_string(checkpoints.size()) + " trials, the search has " +
           std::to_string(made->trials());
    return false;
  }
  const std::string key = search_key(j.id, i);
  searches_.erase(key);
  auto& st = searches_
                 .emplace(key, search_state{std::move(*made), std::move(checkpoints), std::move(nodes),
                                            std::move(attempts)})
                 .first->second;
  // Segments still running go back to their trainers under the attempt they
  // hold; the rest are queued again past the fence.
  std::vector<policy::policy::decisions> later;
  std::string reattached, queued;
  std::vector<hpo_segment> requeue;
  for (const hpo_segment& seg : st.search.in_flight()) {
    auto p = placed.find(seg.trial);
    const bool alive = p != placed.end() && cx.node_ids_.count(p->second.first) && cx.in_policy_[p->second.first] &&
                       !cx.slots_.count(p->second.first);
    if (alive) {
      const policy::job_id pid = next_trial_pid_++;
      auto d = cx.policy_.restore_running(trial_spec(cx, j, i, seg.trial, pid), {cx.node_ids_.at(p->second.first)},
                                          cx.ms(now), cx.ms(now));
      if (d) {
        trials_[pid] = trial_run{j.id, i, seg, p->second.first, p->second.second};
        jobs_context::slot sl;
        sl.job = j.id;
        sl.stage = i;
        sl.trial = pid;
        cx.slots_[p->second.first] = sl;
        later.push_back(std::move(*d));
        reattached += (reattached.empty() ? "" : ", ") + std::to_string(seg.trial) + " on " + p->second.first;
        continue;
      }
    }
    requeue.push_back(seg);
  }
  for (auto& a : st.attempts) a += attempt_fence;
  for (const hpo_segment& seg : requeue) {
    queue_segment(cx, j, i, seg, now);
    queued += (queued.empty() ? "" : ", ") + std::to_string(seg.trial);
  }
  (void)cx.record(j, s.name, "hpo_resumed",
                  "scheduler restarted: the search resumes from its journal (" +
                      std::to_string(st.search.journal().size()) + " entries, " +
                      std::to_string(st.search.steps_granted()) + " steps granted); trials " +
                      (reattached.empty() ? std::string("none") : reattached) + " still running, trials " +
                      (queued.empty() ? std::string("none") : queued) + " queued again",
                  now);
  for (const auto& d : later) cx.apply(d, now);
  if (searches_.count(key)) {
    remove_trials(cx, j, i, searches_.at(key).search.take_retired(), "pruned for good: no later result can promote them",
                  now);
    fill(cx, j, i, now);
  }
  save(cx, j, i);
  return true;
}

}  // namespace loom::scheduler
