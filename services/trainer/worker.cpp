#include "services/trainer/worker.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/cdc/received_shards.hpp"
#include "libs/cdc/sync_client.hpp"
#include "libs/collective/ring.hpp"
#include "libs/files/confine.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/dataset_dirs.hpp"
#include "libs/layout/layout.hpp"
#include "libs/metrics/metrics.hpp"
#include "libs/retry/backoff.hpp"
#include "libs/runtime/restart_policy.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/ingest.pb.h"
#include "loom/v1/jobs.pb.h"
#include "libs/runspec/input_files.hpp"
#include "libs/runspec/run_config.hpp"
#include "services/trainer/diloco_stage.hpp"
#include "services/trainer/hpo/trial_score.hpp"
#include "services/trainer/run/training_run.hpp"

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

namespace loom::trainer {
namespace {
// One poll a second: progress reaches `loom job watch` within a second and a
// finished stage's successor starts within about one (the ≤ 1 min stage switch).
constexpr std::chrono::milliseconds poll_interval{1000};
// A stage whose thread throws (e.g. bad_alloc) restarts from its latest
// snapshot at most this often in the window, then it is reported failed.
constexpr int max_restarts = 2;
constexpr std::chrono::minutes restart_window{10};

void log(const char* fmt, const std::string& a, const std::string& b = "") {
  std::fprintf(stderr, fmt, a.c_str(), b.c_str());
  std::fflush(stderr);
}

// Where a stage's data.dataset of `tenant` is fetched to and trained from
// (per tenant, as at ingest: libs/layout/dataset_dirs.hpp).
std::string fetched_datasets(const runtime::service_env& env, const std::string& tenant) {
  return layout::tenant_datasets_root(env.paths.state("trainer") + "/datasets", tenant);
}

// Brings <data>/trainer/datasets/[.tenant-T/]<name> up to date with dataset
// `name` of the job's tenant at this deployment's ingest (at an edge site: the
// site's ingest, so a cloud job of tenant T reads the site's tenant-T
// dataset): SyncInfo says where its sync server listens, then a
// cdc::sync_client with the trainer's own key (admitted: it is in the
// deployment's curve dir, and the trainer key may read any tenant's dataset
// there) fetches only the chunks that changed — an unchanged dataset costs
// one manifest round trip — and accepts them only if they match their
// manifest.json (cdc::check_received_shards). The pull has a ZeroMQ context of
// its own so that `stop` (cancel, shutdown) ends it at once: shutting the
// context down fails the client's next socket call. Errors name the dataset
// and ingest.
status fetch_dataset(runtime::service_env& env, const std::string& tenant, const std::string& name,
                     const std::atomic<bool>& stop) {
  auto eps = layout::read_endpoints(env.paths.endpoints());  // fresh: ingest may have moved
  const auto* ingest = eps ? eps->find("ingest") : env.eps.find("ingest");
  const std::string rpc = ingest ? ingest->rpc : "";
  auto fail = [&](const std::string& where, const error& e) {
    return make_error(e.code, "data.dataset " + name + ": cannot fetch it from the ingest service at " + where + ": " +
                                  e.message);
  };
  if (rpc.empty()) return fail("(none)", make_error(errc::unavailable, "no ingest endpoint in " + env.paths.endpoints()));
  auto key = wire::load_public_key(env.paths.curve_dir(), "ingest");
  if (!key) return fail(rpc, key.err());
  wire::client cli(*env.ctx, rpc, *key, env.keys, wire::client_options{std::chrono::milliseconds(2000), 1});
  auto info = wire::call_typed<loom::v1::SyncInfoReply>(cli, loom::v1::SyncInfoRequest{}, env.service_token());
  if (!info) return fail(rpc, info.err());

  const std::string root = fetched_datasets(env, tenant);
  if (auto st = files::make_dirs(root); !st) return st;
  // One pull into a directory at a time (two trainers sharing a data dir).
  const std::string lock_path = root + "/." + name + ".lock";
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) {
    if (lock_fd >= 0) ::close(lock_fd);
    return make_error(errc::internal, "data.dataset " + name + ": cannot lock " + lock_path);
  }
  const std::string into = root + "/" + name;
  std::error_code ec;
  const bool existed = std::filesystem::exists(into, ec);
  zmq::context_t pull_ctx(1);
  std::atomic<bool> done{false};
  std::thread watch([&] {
    while (!done && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) pull_ctx.shutdown();
  });
  cdc::sync_client_options co;
  co.accept = [&](const cdc::staged_version& v) { return cdc::check_received_shards(v, name, &stop); };
  cdc::sync_client client(pull_ctx, env.keys, info->public_key(), co);
  auto pulled = client.pull(info->endpoint(), tenant == layout::default_tenant ? "" : tenant, name, into);
  done = true;
  watch.join();
  if (!pulled && !existed) std::filesystem::remove_all(into, ec);  // e.g. a dataset ingest does not have
  ::close(lock_fd);
  if (!pulled) return fail(rpc + " (sync " + info->endpoint() + ")", pulled.err());
  std::fprintf(stderr,
               "trainer: fetched dataset %s from ingest sync %s into %s: %llu bytes received, %llu of %llu files "
               "updated, %llu removed, %.2f s\n",
               name.c_str(), info->endpoint().c_str(), into.c_str(),
               static_cast<unsigned long long>(pulled->chunk_bytes_fetched),
               static_cast<unsigned long long>(pulled->files_updated), static_cast<unsigned long long>(pulled->files),
               static_cast<unsigned long long>(pulled->files_removed), pulled->seconds);
  std::fflush(stderr);
  return ok_status();
}
// The host of this trainer's RPC endpoint (tcp://HOST:PORT): its collective
// inbox listens there too, so peers reach it where they reach the service.
std::string inbox_bind(const std::string& rpc) {
  const auto scheme = rpc.find("://");
  const auto colon = rpc.rfind(':');
  if (scheme == std::string::npos || colon == std::string::npos || colon <= scheme + 3) return "tcp://127.0.0.1:*";
  return rpc.substr(0, colon) + ":*";
}
}  // namespace

worker::worker(runtime::service_env& env, std::shared_ptr<work_board> board) : env_(env), board_(std::move(board)) {
  auto in = collective::inbox::bind(*env_.ctx, env_.keys, "loom", inbox_bind(env_.rpc_endpoint));
  if (in) {
    inbox_ = std::move(*in);
    log("trainer: collective inbox at %s%s\n", inbox_->endpoint());
  } else {
    log("trainer: no collective inbox (%s); data-parallel stages will fail here%s\n", in.err().to_string());
  }
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

std::pair<std::string, std::string> worker::run_stage(stage_run& run_ref) {
  stage_run* run = &run_ref;
  using outcome = std::pair<std::string, std::string>;
  auto failed = [](const std::string& why) { return outcome{"failed", why}; };
  if (env_.eps.is_site()) {
    // An edge site's trainer: the cloud names its own jobs/ dir; the stage's
    // files stay in this site's (and a diloco stage starts from the
    // aggregator's global parameters, not a cloud checkpoint path).
    run->out_dir = env_.paths.jobs() + "/" + run->job + "/" + run->stage;
    run->init_from.clear();
  }
  if (auto st = files::make_dirs(run->out_dir); !st) return failed(st.err().message);
  const std::string origin = run->out_dir + "/config.toml";
  (void)files::write_atomic(origin, run->config_toml);
  // The scheduler's init_from (the previous stage's checkpoint) is part of the
  // config as parsed: a dpo or rl stage is refused without one.
  std::vector<std::string> placed;
  if (!run->init_from.empty()) placed.push_back("model.init_from=\"" + run->init_from + "\"");
  auto cfg = runspec::parse_run_config(run->config_toml, origin, placed);
  if (!cfg) return failed(cfg.err().message);
  cfg->out_dir = run->out_dir;
  if (!run->init_from.empty()) cfg->init_from = run->init_from;
  if (cfg->is_diloco()) localize(*cfg, *run);  // this site's directory, data and data order
  if (auto st = confine_inputs(*cfg, *run); !st) return failed(st.err().message);
  if (auto st = runspec::check_run_files(*cfg, origin); !st) return failed(st.err().message);
  (void)board_->with([&](work_state& w) {
    w.set_total_steps(static_cast<std::uint64_t>(cfg->steps));
    return ok_status();
  });
  run_options o;
  o.resume = true;  // a re-placed or restarted stage continues from its snapshots
  o.data_dir = env_.paths.root;
  o.dataset_root = env_.paths.root + "/datasets";
  if (!cfg->dataset.empty()) {  // train from this node's copy, fetched from ingest
    const std::string tenant = run->tenant.empty() ? std::string(layout::default_tenant) : run->tenant;
    if (auto st = fetch_dataset(env_, tenant, cfg->dataset, stop_training_); !st)
      return outcome{stop_training_ ? "stopped" : "failed", st.err().message};
    o.dataset_root = fetched_datasets(env_, tenant);
  }
  o.stop = &stop_training_;
  o.log = &std::cerr;  // <data>/logs/trainer.log under `loom up`
  o.on_started = [&] { (void)board_->with([](work_state& w) { return w.started(); }); };
  o.on_step = [&](const step_record& rec) {
    if (env_.metrics) {  // loom_trainer_*: the stage in progress on this trainer
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
  o.on_rollback = [&](std::uint64_t bad_step, std::uint64_t back_to, const std::string& why) {
    if (!env_.audit) return;
    auto r = audit::service_record(
        env_.node_id, env_.zone, "trainer", "checkpoint.rollback", run->job, why,
        nlohmann::json{{"stage", run->stage}, {"bad_step", bad_step}, {"back_to_step", back_to}}.dump());
    r.tenant = run->tenant;
    env_.audit->emit(std::move(r));
  };
  o.on_notice = [&](const std::string& kind, const std::string& text) {
    log("trainer: %s\n", run->job + "/" + run->stage + ": " + kind + ": " + text);
    if (kind == "snapshot_fallback" && env_.audit) {  // rollbacks are audited by on_rollback
      auto r = audit::service_record(env_.node_id, env_.zone, "trainer", "checkpoint.fallback", run->job, text,
                                     nlohmann::json{{"stage", run->stage}}.dump());
      r.tenant = run->tenant;
      env_.audit->emit(std::move(r));
    }
    const auto now = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    std::lock_guard lock(mu_);
    const std::uint64_t seq = run->notices.empty() ? now : std::max(now, run->notices.back().seq + 1);
    run->notices.push_back({seq, kind, text});
  };
  o.on_snapshot = [&](const std::string& dir) {
    (void)board_->with([&](work_state& w) {
      w.snapshot(dir);
      return ok_status();
    });
  };
  // A data-parallel group: this trainer is member `rank`; the ring sums each
  // step's gradients. An exchange that fails (a peer died, hung or moved on to
  // a newer formation) ends the run with `regroup`, not `failed`.
  std::unique_ptr<collective::group> grp;
  std::atomic<bool> exchange_failed{false};
  std::unique_ptr<site_sync> site;
  // An hpo trial (the scheduler's search): at its rung the training thread
  // scores the held-out text, and the run ends there with a snapshot (the
  // schedule runs over train.steps: a promoted trial resumes from it).
  std::optional<trial_scorer> scorer;
  bool rung_reached = false;
  if (run->stop_at > 0) {
    if (cfg->is_diloco() || run->world > 1) return failed("an hpo trial runs on one trainer, not a group");
    auto made = trial_scorer::make(*cfg, run->eval_text);
    if (!made) return failed(made.err().message);
    scorer = std::move(*made);
    o.outer.after_step = [&](std::uint64_t step, std::span<float> p, std::uint64_t) -> status {
      if (step != run->stop_at) return ok_status();
      auto loss = scorer->score(p);
      if (!loss) return loss.err();
      log("trainer: %s\n", run->job + "/" + run->stage + ": validation loss " + std::to_string(*loss) + " at step " +
                               std::to_string(step));
      (void)board_->with([&](work_state& w) {
        w.scored(step, *loss);
        return ok_status();
      });
      rung_reached = true;
      if (step < static_cast<std::uint64_t>(cfg->steps)) stop_training_ = true;  // ends after this step's snapshot
      return ok_status();
    };
  }
  if (cfg->is_diloco()) {
    auto made = make_site_sync(env_, *cfg, *run, &stop_training_);
    if (!made) return failed(made.err().message);
    site = std::move(*made);
    o.outer.start = [&](std::span<float> p) { return site->start(p); };
    o.outer.after_step = [&](std::uint64_t step, std::span<float> p, std::uint64_t tokens) {
      auto st = site->after_step(step, p, tokens);  // a copy and a lock: the network is the sync thread's
      publish(env_.metrics, *site);
      (void)board_->with([&](work_state& w) {
        w.site(report_of(*site));
        return ok_status();
      });
      return st;
    };
    o.outer.finish = [&, take_global = run->rank == 0](std::uint64_t step, std::span<float> p) {
      auto st = site->finish(step, p, take_global);
      publish(env_.metrics, *site);
      (void)board_->with([&](work_state& w) {
        w.site(report_of(*site));
        return ok_status();
      });
      return st;
    };
  } else if (run->world > 1) {
    if (!inbox_) return failed("this trainer has no collective inbox (see its log): it cannot join a group");
    collective::group_options go;
    go.rank = run->rank;
    go.world = run->world;
    go.generation = run->generation;
    go.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg->parallel_timeout_s * 1000));
    go.stop = &stop_training_;
    go.members = run->peers;
    auto joined = collective::group::join(*env_.ctx, env_.keys, *inbox_, std::move(go));
    if (!joined) return outcome{"regroup", "cannot join the group: " + joined.err().to_string()};
    grp = std::move(*joined);
    o.group = {run->rank, run->world, [&](std::span<float> d) {
                 auto st = grp->all_reduce_sum(d);
                 if (!st) exchange_failed = true;
                 return st;
               }};
    log("trainer: %s joined its group%s\n", run->job + "/" + run->stage,
        " as rank " + std::to_string(run->rank) + " of " + std::to_string(run->world) + ", generation " +
            std::to_string(run->generation));
  }
  // A crash restarts the run from its latest snapshot, as the runtime's
  // supervisor restarts an actor: a few times, with backoff, then it escalates.
  runtime::restart_policy restarts(max_restarts, restart_window);
  retry::backoff delay(std::chrono::milliseconds(500), std::chrono::milliseconds(5000));
  for (;;) {
    try {
      auto sum = run_training(*cfg, o);
      if (site)  // what this site sent and waited, however the run ended
        log("trainer: %s\n", run->job + "/" + run->stage + ": " + describe(site->stats()));
      if (!sum && exchange_failed && !stop_training_)
        return outcome{"regroup", "the group's exchange failed: " + sum.err().to_string()};
      if (!sum) return failed(sum.err().message);
      if (site && run->rank == 0 && !sum->stopped && !sum->snapshot.empty()) {
        // The stage's end at the aggregator: at an edge site the global model
        // into the cloud's stage dir; here the checkpoint is already the stage's.
        auto end = end_aggregation(env_, *run, sum->snapshot, !env_.eps.is_site());
        if (!end) return failed("ending the aggregation: " + end.err().message);
        if (env_.eps.is_site())
          log("trainer: %s\n", run->job + "/" + run->stage + ": the global model is the cloud's " + end->snapshot);
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
      if (rung_reached && sum->steps == run->stop_at) return outcome{"succeeded", ""};  // an hpo trial's rung
      return outcome{sum->stopped ? "stopped" : "succeeded", ""};
    } catch (const std::exception& e) {
      // A member cannot restart alone: the others are inside the same step.
      if (grp) return outcome{"regroup", std::string("training crashed: ") + e.what()};
      if (restarts.on_crash(runtime::restart_policy::clock::now()) == runtime::restart_policy::verdict::escalate)
        return failed(std::string("training crashed ") + std::to_string(max_restarts + 1) + " times: " + e.what());
      const auto wait = delay.next();
      log("trainer: %s crashed (%s); restarting from its latest snapshot\n", run->job + "/" + run->stage,
          std::string(e.what()) + " in " + std::to_string(wait.count()) + " ms");
      for (auto until = std::chrono::steady_clock::now() + wait;
           std::chrono::steady_clock::now() < until && !stop_training_;)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (stop_training_) return outcome{"stopped", "stopped while restarting after a crash"};
    }
  }
}

void worker::poll_loop() {
  const auto* sched = env_.eps.find("scheduler");
  auto sched_key = wire::load_public_key(layout::reach(env_.paths, env_.eps, "scheduler").key_dir, "scheduler");
  if (!sched || sched->rpc.empty() || !sched_key) {
    log("trainer: no scheduler endpoint or key in %s; not taking work\n", env_.paths.root);
    return;
  }
  wire::client cli(*env_.ctx, sched->rpc, *sched_key, env_.keys,
                   wire::client_options{std::chrono::milliseconds(500), 0});
  while (!quit_) {
    const work_view v = board_->view();
    poll_facts facts;
    facts.node = env_.node_id;
    facts.report = board_->with([](work_state& w) { return w.report(); });
    if (inbox_) {
      facts.inbox_endpoint = inbox_->endpoint();
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
