// run_support: the small pieces run_training (training_run.cpp) is built
// from — logging, the data's identity, setting newer snapshots aside, the
// group's agreement at start, the machine's memory, the engine's optimiser
// and schedule from a run config, and reporting refused snapshots. Free
// functions; no state.
#pragma once

#include "libs/ckpt/snapshot.hpp"
#include "libs/runspec/run_config.hpp"
#include "libs/status/status.hpp"
#include "libs/engine/optimizer.hpp"
#include "libs/engine/train_step.hpp"
#include "services/trainer/run/training_run.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>

namespace loom::trainer {

// The engine's interrupt check for a run (gpt2::set_interrupt): true once a
// stop was asked and the step that started at `step_started` has gone on
// longer than o.interrupt_grace. REQUIRES: o.stop; both outlive the model.
inline std::function<bool()> stop_interrupt(const run_options& o,
                                            const std::chrono::steady_clock::time_point& step_started) {
  return [stop = o.stop, grace = o.interrupt_grace, &step_started] {
    return stop->load() && std::chrono::steady_clock::now() - step_started > grace;
  };
}

inline std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// One line to o.log, when there is one.
void say(const run_options& o, const std::string& line);
// True when `root` holds a step-N directory.
bool has_snapshots(const std::string& root);
// The identity of the data the run reads: the SHA-256 of its manifest, which
// lists every shard's. Where each shard is placed does not change what a run
// that reads every shard sees, so without `with_placement` a placed manifest
// is hashed with its placement left out (a dataset placed anew does not stop
// its runs from resuming); data.local reads by placement, so it counts there.
result<std::string> data_identity(const std::string& dir, bool with_placement);
// A resumed run will publish steps after `step` again: the snapshots there
// (refused as corrupt, or never committed by LATEST) move to root/refused/.
status set_aside_newer(const std::string& root, std::uint64_t step, const run_options& o);
// A group's start: every member learns the step of rank 0's snapshot (0: none)
// and that all run the same numbers (conflict otherwise).
result<std::uint64_t> agree_start(const run_options::group_member& g, std::uint64_t step, const std::string& run_hash);
// Physical memory of this machine in bytes.
std::uint64_t machine_memory();
engine::adamw_config adam_of(const runspec::run_config& c);
engine::lr_schedule schedule_of(const runspec::run_config& c);
// Warnings of a snapshot load (refused newer snapshots) go to the log and,
// as one "snapshot_fallback" notice, to the job.
void report_warnings(const run_options& o, const ckpt::loaded_snapshot& where, const std::string& what);
// "" for a healthy step (1-based `step`); else why it is an anomaly: a
// non-finite loss or gradient norm; divergence — a loss above `diverge_ratio`
// times the run's start (the mean of its first 5 losses, or fewer while
// there are fewer) and above it by more than 1 (diverge_ratio 0: no check),
// named "diverged"; or a loss spike — above the
// mean of the last `window` losses of `recent` by more than `zscore`
// standard deviations (and by 1%); zscore <= 0 or fewer losses than the
// window: no spike check.
struct anomaly_limits {
  int window = 50;
  double zscore = 6.0;
  double diverge_ratio = 2.0;
};
std::string step_anomaly(const engine::step_stats& s, std::uint64_t step, std::span<const float> recent,
                         const anomaly_limits& limits);
// train.precision (`asked`: fp32, bf16 or auto) as this CPU allows it
// (issue 28): choose_precision over probe_bf16().
engine::precision_choice resolve_precision(const std::string& asked);
// A model in `chosen`'s precision (made in it: gpt2::create); where oneDNN
// refuses bf16 after all, an fp32 one, and `chosen` says so and why.
result<engine::gpt2> create_model(const model::gpt2_config& cfg, int batch, int seq_len,
                                  engine::precision_choice& chosen);
// Prints "precision: <used> (<why>)" and tells o.on_precision.
void report_precision(const run_options& o, const engine::precision_choice& chosen);
// A resumed snapshot whose steps ran in `was` while this run continues in
// `now` (a bf16 snapshot on a machine without bf16, or the other way): says
// so and reports a "precision_changed" notice; nothing when they agree.
void note_precision_change(const run_options& o, const std::string& snapshot_dir, const std::string& was,
                           const std::string& now);

}  // namespace loom::trainer
