#include "services/trainer/worker.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/files/files.hpp"
#include "libs/metrics/metrics.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/jobs.pb.h"
#include "services/trainer/run/run_config.hpp"
#include "services/trainer/run/training_run.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

namespace loom::trainer {
namespace {
// One poll a second: progress reaches `loom job watch` within a second and a
// finished stage's successor starts within about one (the ≤ 1 min stage switch).
constexpr std::chrono::milliseconds poll_interval{1000};
// A stage whose thread throws (e.g. bad_alloc) restarts from its latest snapshot this often.
constexpr int max_crashes = 3;

void log(const char* fmt, const std::string& a, const std::string& b = "") {
  std::fprintf(stderr, fmt, a.c_str(), b.c_str());
  std::fflush(stderr);
}
}  // namespace

worker::worker(runtime::service_env& env) : env_(env) { poller_ = std::thread([this] { poll_loop(); }); }

worker::~worker() {
  quit_ = true;
  stop_training_ = true;
  cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  join_training();
}

void worker::join_training() {
  if (training_.joinable()) training_.join();
}

void worker::start(stage_run run) {
  join_training();  // the previous stage's thread has ended (its state was reported)
  stop_training_ = false;
  auto r = std::make_shared<stage_run>(std::move(run));
  {
    std::lock_guard lock(mu_);
    current_ = r;
  }
  log("trainer: starting %s (attempt %s)\n", r->job + "/" + r->stage, std::to_string(r->attempt));
  training_ = std::thread([this, r] { train(r); });
}

void worker::train(std::shared_ptr<stage_run> run) {
  auto finish = [&](const std::string& state, const std::string& message) {
    std::lock_guard lock(mu_);
    run->state = state;
    run->message = message;
  };
  if (auto st = files::make_dirs(run->out_dir); !st) return finish("failed", st.err().message);
  const std::string origin = run->out_dir + "/config.toml";
  (void)files::write_atomic(origin, run->config_toml);
  auto cfg = parse_run_config(run->config_toml, origin);
  if (!cfg) return finish("failed", cfg.err().message);
  cfg->out_dir = run->out_dir;
  if (!run->init_from.empty()) cfg->init_from = run->init_from;
  {
    std::lock_guard lock(mu_);
    run->total_steps = static_cast<std::uint64_t>(cfg->steps);
  }
  run_options o;
  o.resume = true;  // a re-placed or restarted stage continues from its snapshots
  o.data_dir = env_.paths.root;
  o.dataset_root = env_.paths.root + "/datasets";
  o.stop = &stop_training_;
  o.log = &std::cerr;  // <data>/logs/trainer.log under `loom up`
  o.on_step = [&](const step_record& rec) {
    if (env_.metrics) {  // loom_trainer_*: the stage in progress on this trainer
      env_.metrics->add("training_steps_total", {}, 1);
      env_.metrics->set("training_step", {}, double(rec.step));
      env_.metrics->set("training_loss", {}, double(rec.loss));
      env_.metrics->set("training_tokens_per_second", {}, rec.tokens_per_s);
    }
    std::lock_guard lock(mu_);
    run->step = rec.step;
    run->loss = rec.loss;
    run->tokens_per_s = rec.tokens_per_s;
    if (rec.step == 1) run->first_loss = rec.loss;
  };
  o.on_rollback = [&](std::uint64_t bad_step, std::uint64_t back_to, const std::string& why) {
    if (!env_.audit) return;
    audit::record r;
    r.principal = env_.node_id;
    r.role = "service";
    r.zone = env_.zone;
    r.action = "checkpoint.rollback";
    r.job_id = run->job;
    r.reason = why;
    r.payload = nlohmann::json{{"stage", run->stage}, {"bad_step", bad_step}, {"back_to_step", back_to}}.dump();
    r.service = "trainer";
    env_.audit->emit(std::move(r));
  };
  o.on_snapshot = [&](const std::string& dir) {
    std::lock_guard lock(mu_);
    run->checkpoint = dir;
  };
  for (int crash = 0;; ++crash) {
    try {
      auto sum = run_training(*cfg, o);
      if (!sum) return finish("failed", sum.err().message);
      {
        std::lock_guard lock(mu_);
        run->step = sum->steps;
        run->loss = sum->last_loss;
        run->checkpoint = sum->snapshot;
      }
      log("trainer: %s %s\n", run->job + "/" + run->stage, sum->stopped ? "stopped" : "succeeded");
      return finish(sum->stopped ? "stopped" : "succeeded", "");
    } catch (const std::exception& e) {
      if (crash + 1 >= max_crashes) return finish("failed", std::string("training crashed: ") + e.what());
      log("trainer: %s crashed (%s); restarting from its latest snapshot\n", run->job + "/" + run->stage, e.what());
    }
  }
}

void worker::poll_loop() {
  const auto* sched = env_.eps.find("scheduler");
  auto sched_key = wire::load_public_key(env_.paths.curve_dir(), "scheduler");
  if (!sched || sched->rpc.empty() || !sched_key) {
    log("trainer: no scheduler endpoint or key in %s; not taking work\n", env_.paths.root);
    return;
  }
  wire::client cli(*env_.ctx, sched->rpc, *sched_key, env_.keys,
                   wire::client_options{std::chrono::milliseconds(500), 0});
  while (!quit_) {
    loom::v1::PollWorkRequest req;
    req.mutable_node()->set_value(env_.node_id);
    std::shared_ptr<stage_run> cur;
    {
      std::lock_guard lock(mu_);
      cur = current_;
      if (cur) {
        req.set_state(cur->state);
        req.set_job(cur->job);
        req.set_stage(cur->stage);
        req.set_attempt(cur->attempt);
        req.set_step(cur->step);
        req.set_total_steps(cur->total_steps);
        req.set_loss(cur->loss);
        req.set_first_loss(cur->first_loss);
        req.set_tokens_per_s(cur->tokens_per_s);
        req.set_checkpoint(cur->checkpoint);
        req.set_message(cur->message);
      } else {
        req.set_state("idle");
      }
    }
    auto rep = wire::call_typed<loom::v1::PollWorkReply>(cli, req, env_.service_token());
    if (rep) {
      if (rep->stop()) stop_training_ = true;
      const bool finished = cur && cur->state != "running";
      if (finished) {  // reported: back to idle
        join_training();
        std::lock_guard lock(mu_);
        current_.reset();
        cur.reset();
      }
      if (!cur && rep->has_assignment() && !quit_) {
        const auto& a = rep->assignment();
        stage_run run;
        run.job = a.job();
        run.stage = a.stage();
        run.config_toml = a.config_toml();
        run.out_dir = a.out_dir();
        run.init_from = a.init_from();
        run.attempt = a.attempt();
        start(std::move(run));
        continue;  // report "running" at once
      }
      if (cur && rep->has_assignment() &&
          (rep->assignment().job() != cur->job || rep->assignment().stage() != cur->stage))
        stop_training_ = true;  // told to run something else: stop this one first
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, poll_interval, [&] { return quit_.load(); });
  }
}

}  // namespace loom::trainer
