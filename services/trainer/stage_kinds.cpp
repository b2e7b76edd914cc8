// The worker's stage setup, one piece per concern: the stage's config (its
// directory, the scheduler's init_from, a diloco site's localisation, the
// input rule), the options every run shares (the fetched dataset, progress,
// audit and notices), one setup per kind of stage, and the crash loop.
#include "services/trainer/stage_kinds.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/dataset_dirs.hpp"
#include "libs/layout/layout.hpp"
#include "libs/metrics/metrics.hpp"
#include "libs/model/memory.hpp"
#include "libs/retry/backoff.hpp"
#include "libs/runspec/input_files.hpp"
#include "libs/runtime/restart_policy.hpp"
#include "libs/runtime/service.hpp"
#include "services/trainer/dataset_fetch.hpp"
#include "services/trainer/diloco_stage.hpp"
#include "services/trainer/load_shedder.hpp"
#include "services/trainer/stage_process.hpp"
#include "services/trainer/run/training_run.hpp"
#include "services/trainer/trainer_log.hpp"
#include "services/trainer/worker.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <iostream>
#include <thread>

namespace loom::trainer {
namespace {
// A stage whose thread throws (e.g. bad_alloc) restarts from its latest
// snapshot at most this often in the window, then it is reported failed.
constexpr int max_restarts = 2;
// Restarts after a storage fault (a full disk, an I/O error) in the window:
// more than after crashes — they pass, and each costs only a pause and a
// resume from the latest snapshot.
constexpr int max_storage_restarts = 4;
constexpr std::chrono::minutes restart_window{10};
double unix_seconds_now() {
  return std::chrono::duration<double>(loom::wall_now().time_since_epoch()).count();
}
}  // namespace

result<runspec::run_config> worker::stage_config(stage_run& run) {
  if (env_.eps.is_site()) {
    // An edge site's trainer: the cloud names its own jobs/ dir; the stage's
    // files stay in this site's (and a diloco stage starts from the
    // aggregator's global parameters, not a cloud checkpoint path).
    run.out_dir = env_.paths.jobs() + "/" + run.job + "/" + run.stage;
    run.init_from.clear();
  }
  if (auto st = files::make_dirs(run.out_dir); !st) return st.err();
  const std::string origin = run.out_dir + "/config.toml";
  (void)files::write_atomic(origin, run.config_toml);
  // The scheduler's init_from (the previous stage's checkpoint) is part of the
  // config as parsed: a dpo or rl stage is refused without one.
  std::vector<std::string> placed;
  if (!run.init_from.empty()) placed.push_back("model.init_from=\"" + run.init_from + "\"");
  auto cfg = runspec::parse_run_config(run.config_toml, origin, placed);
  if (!cfg) return cfg.err();
  run.config_path = origin;
  run.placed = placed;
  cfg->out_dir = run.out_dir;
  if (!run.init_from.empty()) cfg->init_from = run.init_from;
  if (cfg->is_diloco()) localize(*cfg, run);  // this site's directory, data and data order
  if (auto st = confine_inputs(*cfg, run); !st) return st.err();
  if (auto st = runspec::check_run_files(*cfg, origin); !st) return st.err();
  (void)board_->with([&](work_state& w) {
    w.set_total_steps(static_cast<std::uint64_t>(cfg->steps));
    return ok_status();
  });
  return cfg;
}

result<run_options> worker::common_options(stage_run& run, const runspec::run_config& cfg) {
  run_options o;
  o.resume = true;  // a re-placed or restarted stage continues from its snapshots
  o.data_dir = env_.paths.root;
  o.dataset_root = env_.paths.root + "/datasets";
  o.node = env_.node_id;
  std::string fetched_note;
  if (!cfg.dataset.empty()) {  // train from this node's copy (data.local: its share), fetched from ingest
    const std::string tenant = run.tenant.empty() ? std::string(layout::default_tenant) : run.tenant;
    const std::string share = cfg.local ? env_.node_id : "";
    auto fetched = fetch_dataset(env_, tenant, cfg.dataset, stop_training_, share);
    if (!fetched) return fetched.err();
    o.dataset_root = fetched_datasets(env_, tenant, share);
    fetched_note = fetched->describe(cfg.dataset, share);
  }
  o.stop = &stop_training_;
  o.log = &std::cerr;  // <data>/logs/trainer.log under `loom up`
  o.shed = [this] { return shedder_->shed_reason(); };
  // For the alerts (deploy/prometheus/alerts.yml): the stage runs, its last
  // step and snapshot times (a rank that writes no snapshots shows NaN), and
  // anomaly counters made at 0 so that the first one is an increase.
  o.on_started = [this, writes_snapshots = run.rank == 0] {
    if (env_.metrics) {
      const double now = unix_seconds_now();
      env_.metrics->set("stage_running", {}, 1);
      env_.metrics->set("last_step_unix_seconds", {}, now);
      env_.metrics->set("last_checkpoint_unix_seconds", {}, writes_snapshots ? now : std::nan(""));
      env_.metrics->add("training_anomalies_total", {{"kind", "non_finite"}}, 0);
      env_.metrics->add("training_anomalies_total", {{"kind", "spike"}}, 0);
      env_.metrics->add("training_anomalies_total", {{"kind", "diverged"}}, 0);
    }
    (void)board_->with([](work_state& w) { return w.started(); });
  };
  o.on_anomaly = [this](const std::string& kind) {
    if (env_.metrics) env_.metrics->add("training_anomalies_total", {{"kind", kind}}, 1);
  };
  o.on_step = [this](const step_record& rec) {
    if (env_.metrics) {  // loom_trainer_*: the stage in progress on this trainer
      env_.metrics->set("last_step_unix_seconds", {}, unix_seconds_now());
      env_.metrics->add("training_steps_total", {}, 1);
      env_.metrics->set("training_step", {}, double(rec.step));
      env_.metrics->set("training_loss", {}, double(rec.loss));
      env_.metrics->set("training_tokens_per_second", {}, rec.tokens_per_s);
    }
    (void)board_->with([&](work_state& w) {
      w.progress(rec.step, rec.loss, rec.tokens_per_s);
      return ok_status();
    });
  };
  stage_run* r = &run;
  o.on_rollback = [this, r](std::uint64_t bad_step, std::uint64_t back_to, const std::string& why) {
    if (!env_.audit) return;
    auto rec = audit::service_record(
        env_.node_id, env_.zone, "trainer", "checkpoint.rollback", r->job, why,
        nlohmann::json{{"stage", r->stage}, {"bad_step", bad_step}, {"back_to_step", back_to}}.dump());
    rec.tenant = r->tenant;
    env_.audit->emit(std::move(rec));
  };
  o.on_notice = [this, r](const std::string& kind, const std::string& text) {
    log("trainer: %s\n", r->job + "/" + r->stage + ": " + kind + ": " + text);
    if (kind == "snapshot_fallback" && env_.audit) {  // rollbacks are audited by on_rollback
      auto rec = audit::service_record(env_.node_id, env_.zone, "trainer", "checkpoint.fallback", r->job, text,
                                       nlohmann::json{{"stage", r->stage}}.dump());
      rec.tenant = r->tenant;
      env_.audit->emit(std::move(rec));
    }
    const auto now = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(loom::wall_now().time_since_epoch()).count());
    std::lock_guard lock(mu_);
    const std::uint64_t seq = r->notices.empty() ? now : std::max(now, r->notices.back().seq + 1);
    r->notices.push_back({seq, kind, text});
  };
  o.on_precision = [this, on_notice = o.on_notice](const std::string& used, const std::string& why) {
    if (env_.metrics) env_.metrics->set("training_bf16", {}, used == "bf16" ? 1 : 0);
    (void)board_->with([&](work_state& w) {
      w.set_precision(used);
      return ok_status();
    });
    on_notice("precision", used + " (" + why + ")");  // the job's events say which and why
  };
  if (!fetched_note.empty()) o.on_notice("dataset_fetched", fetched_note);  // what moved to this node, in the job's events
  o.on_snapshot = [this](const std::string& dir) {
    if (env_.metrics) env_.metrics->set("last_checkpoint_unix_seconds", {}, unix_seconds_now());
    (void)board_->with([&](work_state& w) {
      w.snapshot(dir);
      return ok_status();
    });
  };
  return o;
}

// An hpo trial (the scheduler's search): at its rung the training thread
// scores the held-out text, and the run ends there with a snapshot (the
// schedule runs over train.steps: a promoted trial resumes from it).
std::optional<worker::outcome> worker::setup_trial(stage_run& run, const runspec::run_config& cfg, run_options& o,
                                                   stage_extras& x) {
  if (cfg.is_diloco() || run.world > 1) return outcome{"failed", "an hpo trial runs on one trainer, not a group"};
  auto made = trial_scorer::make(cfg, run.eval_text);  // the held-out text checked before the run either way
  if (!made) return outcome{"failed", made.err().message};
  x.trial = true;
  o.resume_at_most = run.stop_at;  // never from past the rung; resumed at it, scored again
  if (stage_processes_) return std::nullopt;  // the stage's own process scores at the rung (run_once)
  x.scorer = std::move(*made);
  const auto last = static_cast<std::uint64_t>(cfg.steps);
  o.outer.after_step = [this, &run, &x, last](std::uint64_t step, std::span<float> p, std::uint64_t) -> status {
    if (step != run.stop_at) return ok_status();
    auto loss = x.scorer->score(p);
    if (!loss) return loss.err();
    trial_scored(run, x, step, *loss);
    if (step < last) stop_training_ = true;  // ends after this step's snapshot
    return ok_status();
  };
  return std::nullopt;
}

// A trial's score at its rung, measured in the training thread or in the
// stage's own process: logged, and on the work board for the scheduler.
void worker::trial_scored(const stage_run& run, stage_extras& x, std::uint64_t step, double loss) {
  log("trainer: %s\n", run.job + "/" + run.stage + ": validation loss " + std::to_string(loss) + " at step " +
                           std::to_string(step));
  (void)board_->with([&](work_state& w) {
    w.scored(step, loss);
    return ok_status();
  });
  x.rung_reached = true;
}

// A diloco stage: this trainer is one site of the stage's aggregation; its
// sync runs on a thread of its own, the training thread only hands over and merges.
std::optional<worker::outcome> worker::setup_site(stage_run& run, const runspec::run_config& cfg, run_options& o,
                                                  stage_extras& x) {
  auto made = make_site_sync(env_, cfg, run, &stop_training_);
  if (!made) return outcome{"failed", made.err().message};
  x.site = std::move(*made);
  auto report = [this, &x] {
    publish(env_.metrics, *x.site);
    (void)board_->with([&](work_state& w) {
      w.site(x.site->progress());
      return ok_status();
    });
  };
  o.outer.start = [&x](std::span<float> p) { return x.site->start(p); };
  o.outer.after_step = [&x, report](std::uint64_t step, std::span<float> p, std::uint64_t tokens) {
    auto st = x.site->after_step(step, p, tokens);  // a copy and a lock: the network is the sync thread's
    report();
    return st;
  };
  o.outer.finish = [&x, report, take_global = run.rank == 0](std::uint64_t step, std::span<float> p) {
    auto st = x.site->finish(step, p, take_global);
    report();
    return st;
  };
  return std::nullopt;
}

// A data-parallel group: this trainer is member `rank`; the ring sums each
// step's gradients. An exchange that fails (a peer died, hung or moved on to
// a newer formation) ends the run with `regroup`, not `failed`.
std::optional<worker::outcome> worker::setup_group(stage_run& run, const runspec::run_config& cfg, run_options& o,
                                                   stage_extras& x) {
  if (!inbox_) return outcome{"failed", "this trainer has no collective inbox (see its log): it cannot join a group"};
  collective::group_options go;
  go.rank = run.rank;
  go.world = run.world;
  go.generation = run.generation;
  go.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.parallel_timeout_s * 1000));
  go.stop = &stop_training_;
  go.members = run.peers;
  auto joined = collective::group::join(*env_.ctx, env_.keys, *inbox_, std::move(go));
  if (!joined) return outcome{"regroup", "cannot join the group: " + joined.err().to_string()};
  x.group = std::move(*joined);
  o.group = {run.rank, run.world, [&x](std::span<float> d) {
               auto st = x.group->all_reduce_sum(d);
               if (!st) x.exchange_failed = true;
               return st;
             }};
  log("trainer: %s joined its group%s\n", run.job + "/" + run.stage,
      " as rank " + std::to_string(run.rank) + " of " + std::to_string(run.world) + ", generation " +
          std::to_string(run.generation));
  return std::nullopt;
}

result<run_summary> worker::run_once(stage_run& run, const runspec::run_config& cfg, const run_options& o,
                                     stage_extras& x) {
  if (!stage_processes_ || x.site) return run_training(cfg, o);
  runtime::box_limits limits;
  limits.memory_bytes = stage_memory_mb_ << 20;
  if (!limits.memory_bytes) {  // room for the run's own estimate twice over, and the process around it
    const auto need = model::estimate_training(cfg.model, std::uint64_t(cfg.batch), std::uint64_t(cfg.seq_len),
                                               std::uint64_t(cfg.grad_accum), cfg.format == "sft", cfg.precision != "fp32");
    limits.memory_bytes = need.total() * 2 + (1ull << 30);
  }
  limits.cpus = cfg.threads > 0 ? cfg.threads : std::max(1u, std::thread::hardware_concurrency());
  auto box = runtime::process_box::make(run.job + "-" + run.stage, limits);
  // The child reads the config from its file: written again on every attempt,
  // so a write that a full disk or failing fsync lost (stage_config does not
  // need the file in-process) is a storage fault restarted like any other,
  // not a stage that fails for good on a missing file.
  if (auto st = files::write_atomic(run.config_path, run.config_toml); !st) return st.err();
  stage_process_spec s;
  s.config = run.config_path;
  s.sets = run.placed;
  s.out_dir = cfg.out_dir;
  s.init_from = cfg.init_from;
  s.data_dir = o.data_dir;
  s.dataset_root = o.dataset_root;
  s.leak_mib_per_step = run.job == leak_job_ ? leak_mib_ : 0;
  s.node = o.node;
  if (x.trial) {  // the child scores at the rung itself; the service records it as in-process
    s.trial_stop_at = run.stop_at;
    s.trial_eval_text = run.eval_text;
  }
  if (x.group) {  // the child's exchanges run here, over the group this service joined
    s.group_rank = o.group.rank;
    s.group_world = o.group.world;
  }
  stage_process_options po;
  po.shed = o.shed;
  po.on_scored = [&](std::uint64_t step, double loss) { trial_scored(run, x, step, loss); };
  if (x.group) po.all_reduce_sum = o.group.all_reduce_sum;
  po.on_spawn = [&](int pid) {
    if (o.on_notice) o.on_notice("stage_process", "runs in process " + std::to_string(pid) + " under " + box.describe());
  };
  return run_in_process(s, o, box, po);
}

// A crash restarts the run from its latest snapshot, as the runtime's
// supervisor restarts an actor: a few times, with backoff, then it escalates.
// A crash is a job event (stage_crashed) with its cause, and so audited. A
// storage fault that may pass (files::storage_fault: a full disk, an I/O
// error) is restarted the same way, 4 times in 10 min (stage_storage_fault):
// with the snapshot's own retries, a fault of several seconds passes, and a
// disk that stays full fails the stage within about a minute.
worker::outcome worker::run_with_restarts(stage_run& run, const runspec::run_config& cfg, const run_options& o,
                                          stage_extras& x) {
  const std::string name = run.job + "/" + run.stage;
  runtime::restart_policy restarts(max_restarts, restart_window), storage_restarts(max_storage_restarts, restart_window);
  retry::backoff delay(std::chrono::milliseconds(500), std::chrono::milliseconds(5000));
  // Waits the next backoff delay (unless told to stop): false when stopped.
  auto pause = [&](std::chrono::milliseconds wait) {
    for (auto until = std::chrono::steady_clock::now() + wait;
         std::chrono::steady_clock::now() < until && !stop_training_;)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return !stop_training_;
  };
  for (;;) {
    try {
      auto sum = run_once(run, cfg, o, x);
      if (x.site) log("trainer: %s\n", name + ": " + describe(x.site->stats()));  // however the run ended
      if (!sum && x.exchange_failed && !stop_training_)
        return outcome{"regroup", "the group's exchange failed: " + sum.err().to_string()};
      // A storage fault that may pass (the chaos harness: a second of full
      // disk failed SFT stages writing their data cache): like a crash, the
      // stage starts again from its latest snapshot after a pause — bitwise
      // as if uninterrupted. A group's members regroup instead.
      if (!sum && !x.group && !x.site && !stop_training_ && files::storage_fault(sum.err())) {
        const bool last =
            storage_restarts.on_crash(runtime::restart_policy::clock::now()) == runtime::restart_policy::verdict::escalate;
        if (o.on_notice)
          o.on_notice("stage_storage_fault", sum.err().message + (last ? "; not restarted again" : "; restarting from its latest snapshot"));
        if (last)
          return outcome{"failed", "storage faults " + std::to_string(max_storage_restarts + 1) + " times: " + sum.err().message};
        const auto wait = delay.next();
        log("trainer: %s storage fault (%s); restarting from its latest snapshot\n", name,
            sum.err().message + " in " + std::to_string(wait.count()) + " ms");
        if (!pause(wait)) return outcome{"stopped", "stopped while waiting out a storage fault"};
        continue;
      }
      // A group member cannot start again alone (the others wait inside the
      // same step or formation): it asks for a new formation, which the
      // scheduler bounds (job_manager::max_regroups). The chaos harness found
      // a gang failed by one failed fsync of its data cache.
      if (!sum && x.group && !stop_training_ && files::storage_fault(sum.err())) {
        if (o.on_notice) o.on_notice("stage_storage_fault", sum.err().message + "; the group re-forms");
        return outcome{"regroup", "storage fault: " + sum.err().message};
      }
      if (!sum) return outcome{"failed", sum.err().message};
      if (x.site && run.rank == 0 && !sum->stopped && !sum->snapshot.empty()) {
        // The stage's end at the aggregator: at an edge site the global model
        // into the cloud's stage dir; here the checkpoint is already the stage's.
        auto end = end_aggregation(env_, run, sum->snapshot, !env_.eps.is_site());
        if (!end) return outcome{"failed", "ending the aggregation: " + end.err().message};
        if (env_.eps.is_site()) log("trainer: %s\n", name + ": the global model is the cloud's " + end->snapshot);
        sum->snapshot = end->snapshot;
        (void)board_->with([&](work_state& w) {
          w.contributions(end->contributed, end->missing);
          return ok_status();
        });
      }
      (void)board_->with([&](work_state& w) {
        w.progress(sum->steps, sum->last_loss, w.view().tokens_per_s);  // the last step's rate stays
        if (!sum->snapshot.empty()) w.snapshot(sum->snapshot);
        return ok_status();
      });
      if (x.rung_reached && sum->steps == run.stop_at) return outcome{"succeeded", ""};  // an hpo trial's rung
      return outcome{sum->stopped ? "stopped" : "succeeded", ""};
    } catch (const std::exception& e) {
      // A member cannot restart alone: the others are inside the same step.
      if (x.group) {
        if (o.on_notice) o.on_notice("stage_crashed", std::string(e.what()) + "; the group re-forms");
        return outcome{"regroup", std::string("training crashed: ") + e.what()};
      }
      const bool last = restarts.on_crash(runtime::restart_policy::clock::now()) == runtime::restart_policy::verdict::escalate;
      if (o.on_notice)
        o.on_notice("stage_crashed", std::string(e.what()) + (last ? "; not restarted again" : "; restarting from its latest snapshot"));
      if (last)
        return outcome{"failed", std::string("training crashed ") + std::to_string(max_restarts + 1) + " times: " + e.what()};
      const auto wait = delay.next();
      log("trainer: %s crashed (%s); restarting from its latest snapshot\n", name,
          std::string(e.what()) + " in " + std::to_string(wait.count()) + " ms");
      if (!pause(wait)) return outcome{"stopped", "stopped while restarting after a crash"};
    }
  }
}

}  // namespace loom::trainer
