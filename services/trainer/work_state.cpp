#include "services/trainer/work_state.hpp"

#include <algorithm>

namespace loom::trainer {

std::string_view to_string(work_phase p) {
  switch (p) {
    case work_phase::idle: return "idle";
    case work_phase::preparing: return "preparing";
    case work_phase::running: return "running";
    case work_phase::stopping: return "stopping";
    case work_phase::regrouping: return "regrouping";
    case work_phase::done: return "done";
  }
  return "unknown";
}

status work_state::move(std::initializer_list<work_phase> from, work_phase to, const char* what) {
  if (std::find(from.begin(), from.end(), v_.phase) == from.end())
    return make_error(errc::conflict, std::string("trainer work: ") + what + " while " +
                                          std::string(to_string(v_.phase)) +
                                          (v_.job.empty() ? "" : " (" + v_.job + "/" + v_.stage + ")"));
  v_.phase = to;
  return ok_status();
}

status work_state::assign(const stage_ref& s) {
  if (auto st = move({work_phase::idle}, work_phase::preparing, "an assignment"); !st) return st;
  clear_stage();
  v_.phase = work_phase::preparing;
  v_.job = s.job;
  v_.tenant = s.tenant;
  v_.stage = s.stage;
  v_.attempt = s.attempt;
  v_.rank = s.rank;
  v_.world = s.world;
  v_.generation = s.generation;
  v_.total_steps = s.total_steps;
  return ok_status();
}

status work_state::started() {
  if (auto st = move({work_phase::preparing}, work_phase::running, "the step loop's start"); !st) return st;
  v_.started = true;
  return ok_status();
}

status work_state::stop() {
  if (v_.phase == work_phase::stopping) return ok_status();
  return move({work_phase::preparing, work_phase::running}, work_phase::stopping, "a stop");
}

status work_state::exchange_failed(const std::string& why) {
  if (auto st = move({work_phase::preparing, work_phase::running, work_phase::stopping}, work_phase::regrouping,
                     "a failed exchange");
      !st)
    return st;
  v_.message = why;
  return ok_status();
}

status work_state::finish(const std::string& outcome, const std::string& message) {
  const work_phase at = v_.phase;
  bool allowed = false;
  // A stage asked to stop may still have finished its last step first.
  if (outcome == "succeeded") allowed = at == work_phase::running || (at == work_phase::stopping && v_.started);
  else if (outcome == "failed") allowed = at == work_phase::preparing || at == work_phase::running || at == work_phase::stopping;
  else if (outcome == "stopped") allowed = at == work_phase::stopping;
  else if (outcome == "regroup") allowed = at == work_phase::regrouping;
  else return make_error(errc::invalid_argument, "trainer work: no outcome " + outcome);
  if (!allowed)
    return make_error(errc::conflict, "trainer work: " + outcome + " while " + std::string(to_string(at)) +
                                          (v_.job.empty() ? "" : " (" + v_.job + "/" + v_.stage + ")"));
  v_.phase = work_phase::done;
  v_.outcome = outcome;
  if (!message.empty() || outcome != "regroup") v_.message = message;
  return ok_status();
}

status work_state::reported() {
  if (auto st = move({work_phase::done}, work_phase::idle, "a report"); !st) return st;
  clear_stage();
  return ok_status();
}

void work_state::progress(std::uint64_t step, double loss, double tokens_per_s) {
  if (v_.phase != work_phase::running && v_.phase != work_phase::stopping) return;
  if (step == 1) v_.first_loss = loss;
  v_.step = step;
  v_.loss = loss;
  v_.tokens_per_s = tokens_per_s;
}

void work_state::set_precision(const std::string& p) {
  if (v_.phase != work_phase::idle) v_.precision = p;
}

void work_state::site(const diloco::site_progress& r) {
  if (v_.phase != work_phase::idle) v_.site = r;
}

void work_state::contributions(std::vector<std::string> contributed, std::vector<std::string> missing) {
  if (v_.phase == work_phase::idle) return;
  v_.contributed = std::move(contributed);
  v_.missing = std::move(missing);
}

void work_state::set_total_steps(std::uint64_t n) {
  if (v_.phase != work_phase::idle) v_.total_steps = n;
}

void work_state::scored(std::uint64_t step, double val_loss) {
  if (v_.phase == work_phase::idle) return;
  v_.val_step = step;
  v_.val_loss = val_loss;
}

void work_state::snapshot(const std::string& dir) {
  if (v_.phase != work_phase::idle) v_.checkpoint = dir;
}

std::string work_state::report() const {
  switch (v_.phase) {
    case work_phase::idle: return "idle";
    case work_phase::done: return v_.outcome;
    default: return "running";
  }
}

void work_state::clear_stage() {
  work_view fresh;
  fresh.isolation = v_.isolation;  // the host's facts stay
  fresh.pressure = v_.pressure;
  fresh.memory_used = v_.memory_used;
  v_ = std::move(fresh);
}

void work_state::host(const std::string& isolation, const std::string& pressure, double memory_used) {
  v_.isolation = isolation;
  v_.pressure = pressure;
  v_.memory_used = memory_used;
}

shown_view shown_to(const work_view& v, bool admin, std::string_view tenant) {
  if (admin || v.job.empty() || v.tenant == tenant) return {v, false};
  shown_view out;
  out.view.phase = v.phase;
  out.view.isolation = v.isolation;  // the host's, not the job's
  out.view.pressure = v.pressure;
  out.view.memory_used = v.memory_used;
  out.withheld = true;
  return out;
}

}  // namespace loom::trainer
