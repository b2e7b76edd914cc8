#include "services/trainer/worker.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/atrest/object.hpp"
#include "libs/audit/emitter.hpp"
#include "libs/collective/ring.hpp"
#include "libs/files/confine.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "libs/metrics/metrics.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/jobs.pb.h"
#include "libs/runspec/input_files.hpp"
#include "libs/runspec/run_config.hpp"
#include "libs/runtime/process_box.hpp"
#include "libs/runtime/scheduler_targets.hpp"
#include "services/trainer/config.hpp"
#include "services/trainer/load_shedder.hpp"
#include "services/trainer/run/training_run.hpp"
#include "services/trainer/stage_kinds.hpp"
#include "services/trainer/trainer_log.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace loom::trainer {
namespace {
// One poll a second: progress reaches `loom job watch` within a second and a
// finished stage's successor starts within about one (the ≤ 1 min stage switch).
constexpr std::chrono::milliseconds poll_interval{1000};
}  // namespace

worker::worker(runtime::service_env& env, std::shared_ptr<work_board> board) : env_(env), board_(std::move(board)) {
  auto in = collective::inbox::bind(*env_.ctx, env_.keys, "loom", runtime::data_bind(env_));
  if (in) {
    inbox_ = std::move(*in);
    log("trainer: collective inbox at %s%s\n", inbox_->endpoint());
  } else {
    log("trainer: no collective inbox (%s); data-parallel stages will fail here%s\n", in.err().to_string());
  }
  // serve_env_ok refused a bad LOOM_SHED_* at start: the settings parse here.
  auto shed = runtime::shed_settings_from_env([](const char* k) { return std::getenv(k); });
  shedder_ = std::make_unique<load_shedder>(shed ? *shed : runtime::shed_settings{}, runtime::pressure_paths{});
  auto isolation = stage_isolation_from_env([](const char* k) { return std::getenv(k); });
  if (isolation) {
    stage_processes_ = isolation->processes;
    stage_memory_mb_ = isolation->memory_mb;
    leak_job_ = isolation->leak_job;
    leak_mib_ = isolation->leak_mib;
  }
  if (stage_processes_) {  // what this host allows, said once (loom status shows it)
    auto probe = runtime::process_box::make("probe", {1ull << 30, 1});
    isolation_ = std::string("processes under ") + runtime::to_string(probe.mode()) +
                 (probe.mode() == runtime::box_mode::rlimit ? " (memory only; " + probe.describe() + ")"
                  : probe.describe().find("no CPU limit") != std::string::npos ? " (memory limit only: " + probe.describe() + ")"
                                                                                : " (memory and CPU limits)");
  }
  log("trainer: stages run in %s%s\n", isolation_, stage_processes_ ? "" : " (LOOM_STAGE_PROCESSES=0)");
  poller_ = std::thread([this] { poll_loop(); });
}

worker::~worker() {
  quit_ = true;
  request_stop();
  cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  join_training();
}

void worker::join_training() {
  if (training_.joinable()) training_.join();
}

void worker::request_stop() {
  stop_training_ = true;
  (void)board_->with([](work_state& w) { return w.stop(); });  // conflict when idle or done: nothing to stop
}

void worker::start(assigned_stage a) {
  join_training();  // the previous stage's thread has ended (its state was reported)
  stop_training_ = false;
  auto r = std::make_shared<stage_run>(std::move(a));
  work_state::stage_ref ref{r->job, r->stage, r->attempt, r->rank, r->world, r->generation, 0, r->tenant};
  if (auto st = board_->with([&](work_state& w) { return w.assign(ref); }); !st) {
    log("trainer: %s%s\n", st.err().to_string());  // a broken invariant of the poll loop: not taken
    return;
  }
  {
    std::lock_guard lock(mu_);
    current_ = r;
  }
  log("trainer: starting %s (attempt %s)\n", r->job + "/" + r->stage, std::to_string(r->attempt));
  training_ = std::thread([this, r] { train(r); });
}

void worker::train(std::shared_ptr<stage_run> run) {
  auto [outcome, message] = run_stage(*run);
  if (env_.metrics) env_.metrics->set("stage_running", {}, 0);  // LoomJobStalled, LoomCheckpointOld
  const std::string name = run->job + "/" + run->stage;
  (void)board_->with([&](work_state& w) {
    if (outcome == "regroup") (void)w.exchange_failed(message);
    auto st = w.finish(outcome, message);
    if (!st && outcome == "stopped") st = w.finish("failed", "stopped without a stop request: " + message);
    if (!st) log("trainer: %s%s\n", st.err().to_string());
    return st;
  });
  log("trainer: %s %s\n", name, outcome + (message.empty() ? "" : ": " + message));
}

status worker::confine_inputs(const runspec::run_config& cfg, const stage_run& run) {
  auto eps = layout::read_endpoints(env_.paths.endpoints());  // fresh: the roots of this `loom up`
  files::root_set roots(layout::job_read_roots(env_.paths, eps ? *eps : env_.eps));
  // Every path value of the config, found by type, and an hpo trial's held-out text (runspec/input_files.hpp).
  auto paths = cfg.input_paths();
  if (!run.eval_text.empty()) paths.emplace_back("hpo.validation", run.eval_text);
  for (const auto& [key, path] : paths) {
    auto st = runspec::check_inputs(roots, {{key, path}});
    if (st) continue;
    if (st.code() == errc::permission_denied && env_.audit)
    {
      auto r = audit::service_record(env_.node_id, env_.zone, "trainer", "data.refused", run.job, st.err().message,
                                     nlohmann::json{{"stage", run.stage}, {"key", key}, {"path", path}}.dump());
      r.tenant = run.tenant;  // in the job's tenant's trail
      env_.audit->emit(std::move(r));
    }
    return st;
  }
  return ok_status();
}

worker::outcome worker::run_stage(stage_run& run) {
  auto failed = [](const error& e) { return outcome{"failed", e.message}; };
  // A KEK past its rotation age is replaced here, in the service (whose
  // rotations are audited: service_main), before a stage (in-process or its
  // own process) seals anything with it.
  if (auto keys = atrest::sealing_keys())
    if (auto st = keys->rotate_if_due(loom::wall_now()); !st) return failed(st.err());
  auto cfg = stage_config(run);
  if (!cfg) return failed(cfg.err());
  auto o = common_options(run, *cfg);
  if (!o) return outcome{stop_training_ ? "stopped" : "failed", o.err().message};
  // One setup per kind of stage: each adds its hooks to the run and keeps
  // what they use in `extras` (stage_kinds.cpp).
  stage_extras extras;
  std::optional<outcome> ended;
  if (run.stop_at > 0)
    ended = setup_trial(run, *cfg, *o, extras);
  else if (cfg->is_diloco())
    ended = setup_site(run, *cfg, *o, extras);
  else if (run.world > 1)
    ended = setup_group(run, *cfg, *o, extras);
  if (ended) return *ended;
  return run_with_restarts(run, *cfg, *o, extras);
}

void worker::poll_loop() {
  const auto* sched = env_.eps.find("scheduler");
  auto sched_key = wire::load_public_key(layout::reach(env_.paths, env_.eps, "scheduler").key_dir, "scheduler");
  if (!sched || sched->rpc.empty() || !sched_key) {
    log("trainer: no scheduler endpoint or key in %s; not taking work\n", env_.paths.root);
    return;
  }
  runtime::scheduler_targets targets(env_.paths, env_.eps.rpc_targets("scheduler"));
  auto connect = [&] {
    return std::make_unique<wire::client>(*env_.ctx, targets.list(), *sched_key, env_.keys,
                                          wire::client_options{std::chrono::milliseconds(500), 0});
  };
  auto client = connect();
  while (!quit_) {
    if (targets.refresh()) {  // a replica added or moved (peers.json)
      client = connect();
      log("trainer: scheduler replicas now %s\n", runtime::describe_targets(targets.list()));
    }
    wire::client& cli = *client;
    work_view v = board_->view();
    if (auto said = shedder_->observe(v.phase == work_phase::running, load_shedder::clock::now()); !said.empty())
      log("trainer: %s%s\n", said);
    poll_facts facts;
    facts.pressure = shedder_->facts();
    (void)board_->with([&](work_state& w) {
      w.host(isolation_, facts.pressure.level, facts.pressure.memory);
      return 0;
    });
    if (env_.metrics && facts.pressure.memory >= 0)
      env_.metrics->set("memory_used_ratio", {}, facts.pressure.memory);  // what load shedding reads
    facts.node = env_.node_id;
    // The state and the figures sent with it from one look at the board: a
    // stage that ended since `v` was taken (a refusal within milliseconds)
    // would otherwise be reported "failed" with the running view's empty
    // message, and that report is the one its end is taken from.
    facts.report = board_->with([&v](work_state& w) {
      v = w.view();
      return w.report();
    });
    if (inbox_) {
      facts.inbox_endpoint = runtime::advertised(env_, inbox_->endpoint());  // what peers on other hosts reach
      facts.inbox_key = inbox_->public_key();
    }
    std::shared_ptr<stage_run> cur;
    {
      std::lock_guard lock(mu_);
      cur = current_;
      if (cur) facts.notices = cur->notices;
    }
    if (cur) facts.holding = &v;
    loom::v1::PollWorkRequest req;
    to_wire(facts, &req);
    auto rep = wire::call_typed<loom::v1::PollWorkReply>(cli, req, runtime::token_for(env_, "scheduler"));
    if (rep) {
      if (rep->stop()) request_stop();
      if (cur && rep->notices_acked()) {
        std::lock_guard lock(mu_);
        std::erase_if(cur->notices, [&](const stage_notice& n) { return n.seq <= rep->notices_acked(); });
      }
      if (cur && req.state() != "running" && req.state() != "idle") {  // its end was reported: back to idle
        join_training();
        (void)board_->with([](work_state& w) { return w.reported(); });
        std::lock_guard lock(mu_);
        current_.reset();
        cur.reset();
      }
      if (!cur && rep->has_assignment() && !quit_) {
        start(from_wire(rep->assignment()));
        continue;  // report "running" at once
      }
      if (cur && rep->has_assignment() &&
          (rep->assignment().job() != cur->job || rep->assignment().stage() != cur->stage ||
           rep->assignment().generation() != cur->generation))
        request_stop();  // told to run something else (or a new formation): stop this one first
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, poll_interval, [&] { return quit_.load(); });
  }
}

}  // namespace loom::trainer
