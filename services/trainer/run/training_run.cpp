#include "services/trainer/run/training_run.hpp"
#include "services/trainer/align/align_run.hpp"
#include "services/trainer/run/run_support.hpp"

#include "libs/ckpt/snapshot.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/model/memory.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/shards/loader.hpp"
#include "libs/engine/kernels.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"
#include "libs/engine/train_step.hpp"
#include "services/trainer/run/metrics_log.hpp"
#include "services/trainer/run/sft_data.hpp"
#include "services/trainer/run/snapshot_io.hpp"
#include "services/trainer/run/text_data.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <optional>
#include <thread>

#include <unistd.h>

namespace loom::trainer {
namespace {

using clock_type = std::chrono::steady_clock;

// One run, in the order it happens: check its shape and limits, prepare the
// data, build the model, resume or initialise it, then the step loop; each a
// method short enough to read at once. Not movable: the loader keeps a
// reference to the dataset.
class run {
 public:
  run(const runspec::run_config& c, const run_options& o)
      : c_(c), o_(o), g_(o.group), lead_(o.group.rank == 0),
        world_(std::max<std::uint32_t>(1, o.group.world)) {}
  run(const run&) = delete;
  run& operator=(const run&) = delete;

  result<run_summary> go() {
    for (auto step : {&run::check_shape, &run::check_limits, &run::prepare_data, &run::build_model,
                      &run::resume_or_init, &run::open_loader})
      if (auto st = (this->*step)(); !st) return st.err();
    if (auto st = loop(); !st) return st.err();
    return finish();
  }

 private:
  status check_shape();     // output dir, the group's rank and size
  status check_limits();    // threads within the cores, the memory estimate within the limit
  status prepare_data();    // shards: the dataset's, or made from data.text / data.sft / records
  status build_model();     // model and optimiser; out of memory halves the micro-batch
  status resume_or_init();  // a snapshot (agreed by the group), init_from, or random
  status open_loader();     // the data cursor, the metrics history, the step's buffers
  status loop();            // steps until the end or a stop
  result<bool> one_step();  // false: stopped
  status roll_back(shards::cursor bad_batch, const std::string& why);
  // Load shedding (issue 30): before a step, when run_options::shed says so.
  status shed();
  // The model made anew for micro-batch `batch` (a divisor of the current one),
  // accumulation raised to keep the tokens per step; the parameters, the
  // optimiser and the data cursor carry on.
  status rebatch(int batch);
  void size_buffers();  // the step's buffers for the current micro-batch
  status snapshot(std::uint64_t step);
  void unpack(int k);
  run_summary finish();

  runspec::run_config c_;  // batch and grad_accum may change on out-of-memory and load shedding
  const run_options& o_;
  const run_options::group_member& g_;
  const bool lead_;              // the member that writes out_dir
  const std::uint32_t world_;
  std::string ckpt_root_, work_dir_, data_dir_, run_hash_, key_, metrics_path_;
  int threads_ = 1;
  std::optional<shards::dataset> ds_;
  std::optional<engine::gpt2> model_;
  std::optional<engine::adamw> opt_;
  std::optional<opened_snapshot> resumed_;
  std::optional<shards::loader> ld_;
  shards::loader_options lo_;
  metrics_log metrics_;
  std::vector<float> recent_;  // losses so far, for the spike check
  std::vector<shards::cursor> skipped_;
  int rollbacks_ = 0;
  engine::precision_choice chosen_{};
  bool shed_exhausted_ = false;  // said once: nothing left to shed here
  run_summary sum_;
  std::uint64_t tokens_seen_ = 0, step_ = 0, total_ = 0, log_every_ = 1;
  engine::lr_schedule schedule_;
  // This member's micro-batches of a step: k = rank, rank + world, ... < grad_accum.
  std::size_t bt_ = 0;
  std::vector<std::uint32_t> in_u_, tg_u_;
  std::vector<std::vector<std::int32_t>> inputs_, targets_;
  std::vector<std::vector<float>> weights_;
  std::vector<engine::micro_batch> micro_;
  engine::data_parallel dp_;
  clock_type::time_point step_started_ = clock_type::now(), last_snapshot_time_ = clock_type::now();
};

status run::check_shape() {
  if (c_.out_dir.empty())
    return make_error(errc::invalid_argument, "no output directory: set output.dir or pass --out DIR");
  if (auto st = files::make_dirs(c_.out_dir); !st) return st;
  ckpt_root_ = c_.out_dir + "/checkpoints";
  if (g_.world > 1 && (!g_.all_reduce_sum || g_.rank >= g_.world))
    return make_error(errc::invalid_argument, fmt("trainer group: rank %u of %u without an all-reduce", g_.rank,
                                                  g_.world));
  if (g_.world > static_cast<std::uint32_t>(c_.grad_accum))
    return make_error(errc::invalid_argument,
                      fmt("trainer group of %u but train.grad_accum is %d: each member takes whole micro-batches",
                          g_.world, c_.grad_accum));
  work_dir_ = lead_ ? c_.out_dir : c_.out_dir + fmt("/rank-%u", g_.rank);
  return ok_status();
}

status run::check_limits() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (c_.threads > cores)
    return make_error(errc::invalid_argument, fmt("train.threads %d exceeds this machine's %d cores: more threads "
                                                  "than cores only slow every process here down (0 uses every core)",
                                                  c_.threads, cores));
  threads_ = c_.threads > 0 ? c_.threads : cores;
  const auto need = model::estimate_training(c_.model, std::uint64_t(c_.batch), std::uint64_t(c_.seq_len),
                                             (std::uint64_t(c_.grad_accum) + world_ - 1) / world_, c_.format == "sft",
                                             c_.precision != "fp32");
  const std::uint64_t limit = o_.memory_limit ? o_.memory_limit : machine_memory() / 4 * 3;
  if (need.total() > limit)
    return make_error(errc::resource_exhausted,
                      "this run needs an estimated " + need.describe() + " but this machine can give it " +
                          model::format_bytes(limit) + ": lower train.batch (now " + std::to_string(c_.batch) +
                          ") or train.seq_len, or use a smaller model");
  engine::kernels::set_threads(threads_);
  return ok_status();
}

status run::prepare_data() {
  data_dir_ = c_.shards;
  if (!c_.dataset.empty()) {
    if (o_.dataset_root.empty())
      return make_error(errc::invalid_argument, "data.dataset " + c_.dataset + ": no dataset root (run it in the trainer service, "
                                                "or use data.shards with the dataset's directory)");
    data_dir_ = o_.dataset_root + "/" + c_.dataset;
  }
  const bool sft = c_.format == "sft";
  if (!c_.dataset.empty() && c_.text.empty() && c_.sft.empty()) {
    if (sft) {  // records from the dataset: its chat records, or pairs of its paragraphs
      auto prepared = prepare_sft_from_dataset(data_dir_, work_dir_ + "/data", c_.tokenizer);
      if (!prepared) return prepared.err();
      data_dir_ = *prepared;
    } else if (!c_.tokenizer.empty()) {
      return make_error(errc::invalid_argument,
                        "data.dataset " + c_.dataset + " holds GPT-2 tokens (as ingest writes them); data.tokenizer " +
                            c_.tokenizer + " applies to data.text and data.sft only");
    }
  } else if (!c_.text.empty() || !c_.sft.empty()) {
    auto prepared = sft ? prepare_sft_dataset(c_.text.empty() ? c_.sft : c_.text, !c_.text.empty(),
                                              work_dir_ + "/data", c_.tokenizer)
                        : prepare_text_dataset(c_.text, work_dir_ + "/data", c_.tokenizer);
    if (!prepared) return prepared.err();
    data_dir_ = *prepared;
  }
  auto ds = shards::dataset::open(data_dir_, shards::verify::eager);
  if (!ds) return ds.err();
  ds_.emplace(std::move(*ds));
  auto data_id = data_identity(data_dir_);
  if (!data_id) return data_id.err();
  run_hash_ = crypto::sha256_hex(c_.math_hash() + "|" + *data_id + "|threads=" + std::to_string(threads_));
  auto key = checkpoint_key(o_.data_dir, ckpt_root_);  // never made anew while snapshots here need the old one
  if (!key) return key.err();
  key_ = *key;
  return ok_status();
}

status run::build_model() {
  // Out of memory: halve the micro-batch and double accumulation — the same
  // tokens per optimiser step, in smaller pieces — until it fits or batch is 1.
  // train.precision as this CPU allows it (bf16 resumed where it is not native: fp32),
  // the model made in it from the start.
  chosen_ = resolve_precision(c_.precision);
  auto create = [&]() -> result<engine::gpt2> {
    if (o_.fail_alloc && o_.fail_alloc(c_.batch))
      return make_error(errc::resource_exhausted, "injected allocation failure");
    return create_model(c_.model, c_.batch, c_.seq_len, chosen_);
  };
  auto made = create();
  // A group must agree on the micro-batch (the members split one data stream):
  // out of memory there is an error naming what to change.
  if (!made && made.code() == errc::resource_exhausted && g_.world > 1)
    return make_error(errc::resource_exhausted,
                      fmt("out of memory at micro-batch %d in a group of %u trainers (%s): set train.batch lower "
                          "and train.grad_accum higher for the whole group",
                          c_.batch, g_.world, made.err().message.c_str()));
  while (!made && made.code() == errc::resource_exhausted && c_.batch > 1) {
    say(o_, fmt("out of memory at micro-batch %d (%s): micro-batch %d, accumulation %d", c_.batch,
                made.err().message.c_str(), c_.batch / 2, c_.grad_accum * 2));
    c_.grad_accum *= 2;
    c_.batch /= 2;
    made = create();
  }
  if (!made) return made.err();
  model_.emplace(std::move(*made));
  sum_.precision = std::string(engine::to_string(chosen_.used));
  report_precision(o_, chosen_);
  // A stop request lets a short step finish (its work is kept) and interrupts
  // a long one after interrupt_grace, within about a layer's time.
  if (o_.stop)
    model_->set_interrupt(stop_interrupt(o_, step_started_));
  opt_.emplace(model_->params().size(), adam_of(c_), model_->layout().ranges());
  return ok_status();
}

status run::resume_or_init() {
  if (!lead_) {
    // Opened below, once rank 0 has said which.
  } else if (o_.resume) {
    auto snap = open_snapshot(ckpt_root_, key_);
    if (snap) resumed_.emplace(std::move(*snap));
    else if (snap.code() != errc::not_found) return snap.err();
    else say(o_, "no snapshot under " + ckpt_root_ + ": starting from step 0");
  } else if (has_snapshots(ckpt_root_)) {
    return make_error(errc::already_exists, ckpt_root_ + " already holds snapshots: pass --resume to continue "
                                                         "that run, or choose another output directory");
  }
  if (g_.world > 1) {
    auto agreed = agree_start(g_, resumed_ ? resumed_->state.step : 0, run_hash_);
    if (!agreed) return agreed.err();
    if (!lead_ && *agreed > 0) {
      auto snap = open_snapshot(ckpt_root_ + "/" + ckpt::step_dir_name(*agreed), key_);
      if (!snap) return snap.err();
      resumed_.emplace(std::move(*snap));
    }
  }
  if (!resumed_) {
    if (c_.init_from.empty()) {
      model_->init_random(c_.seed);
      return ok_status();
    }
    auto from = open_snapshot(c_.init_from, key_);
    if (!from) return from.err();
    report_warnings(o_, from->where, "initialised from " + from->where.dir);
    if (auto st = load_params(*from, *model_); !st) return st;
    say(o_, "initialised from " + from->where.dir);
    return ok_status();
  }
  const opened_snapshot& r = *resumed_;
  report_warnings(o_, r.where, "resumed from " + r.where.dir);
  if (r.state.config_hash != run_hash_)
    return make_error(errc::conflict, r.where.dir + " was made by a different configuration, data or "
                                                    "thread count (hash " +
                                          r.state.config_hash.substr(0, 12) + ", this run " + run_hash_.substr(0, 12) +
                                          "): resuming would not continue that run");
  // A run that shed load goes on in the micro-batch its snapshot ran in:
  // the same pieces, so the same numbers as if it had never stopped.
  if (r.state.micro_batch > 0 && r.state.micro_batch < c_.batch) {
    if (c_.batch % r.state.micro_batch != 0)
      return make_error(errc::conflict, fmt("%s ran in micro-batch %d, which does not divide train.batch %d",
                                            r.where.dir.c_str(), r.state.micro_batch, c_.batch));
    const int from = c_.batch;
    if (auto st = rebatch(r.state.micro_batch); !st) return st;
    say(o_, fmt("micro-batch %d, accumulation %d as the snapshot ran (train.batch %d)", c_.batch, c_.grad_accum, from));
  }
  if (auto st = load_params(r, *model_); !st) return st;
  if (auto st = load_optimizer(r, *opt_); !st) return st;
  note_precision_change(o_, r.where.dir, r.state.precision, sum_.precision);
  if (lead_)
    if (auto st = set_aside_newer(ckpt_root_, r.state.step, o_); !st) return st;
  sum_.first_step = r.state.step;
  tokens_seen_ = r.state.tokens_seen;
  sum_.last_loss = r.state.last_loss;
  sum_.snapshot = r.where.dir;
  skipped_ = r.state.skipped;
  say(o_, fmt("resumed from %s (step %llu, loss %.4f)", r.where.dir.c_str(),
              static_cast<unsigned long long>(sum_.first_step), double(r.state.last_loss)));
  return ok_status();
}

status run::open_loader() {
  lo_.batch = static_cast<std::size_t>(c_.batch);
  lo_.seq_len = static_cast<std::size_t>(c_.seq_len);
  lo_.seed = c_.seed;
  lo_.shuffle = c_.shuffle;
  auto ld = shards::loader::create(*ds_, lo_, resumed_ ? resumed_->state.cursor : shards::cursor{});
  if (!ld) return ld.err();
  ld_.emplace(std::move(*ld));
  // Rank 0 writes the metrics log; the others read its history (the spike check must agree).
  metrics_path_ = c_.out_dir + "/metrics.jsonl";
  auto history = lead_ ? metrics_.open(metrics_path_, sum_.first_step)
                       : metrics_log::read_losses(metrics_path_, sum_.first_step);
  if (!history) return history.err();
  recent_ = std::move(*history);
  size_buffers();
  schedule_ = schedule_of(c_);
  total_ = static_cast<std::uint64_t>(c_.steps);
  log_every_ = std::max<std::uint64_t>(1, total_ / 20);
  step_ = sum_.first_step;
  say(o_, fmt("training L%d H%d C%d (%zu parameters) on %llu tokens: B=%d T=%d accum=%d, steps %llu..%llu, "
              "%d threads",
              c_.model.layers, c_.model.heads, c_.model.channels, model_->params().size(),
              static_cast<unsigned long long>(ds_->token_count()), c_.batch, c_.seq_len, c_.grad_accum,
              static_cast<unsigned long long>(sum_.first_step + 1), static_cast<unsigned long long>(total_), threads_));
  return ok_status();
}

// Every buffer of the loop, allocated once per micro-batch size.
void run::size_buffers() {
  bt_ = std::size_t(c_.batch) * std::size_t(c_.seq_len);
  const int own = static_cast<int>((static_cast<std::uint32_t>(c_.grad_accum) - g_.rank + world_ - 1) / world_);
  const bool sft = c_.format == "sft";
  in_u_.resize(bt_);
  tg_u_.resize(bt_);
  inputs_.assign(own, std::vector<std::int32_t>(bt_));
  targets_.assign(own, std::vector<std::int32_t>(bt_));
  weights_.assign(sft ? own : 0, std::vector<float>(bt_));
  micro_.resize(own);
  for (int k = 0; k < own; ++k)
    micro_[k] = {inputs_[k], targets_[k], sft ? std::span<const float>(weights_[k]) : std::span<const float>()};
  dp_ = engine::data_parallel{c_.grad_accum, g_.all_reduce_sum};
}

status run::rebatch(int batch) {
  const int factor = c_.batch / batch;
  std::vector<float> kept(model_->params().begin(), model_->params().end());
  model_.reset();  // the activations go first: the point is to need less
  auto made = create_model(c_.model, batch, c_.seq_len, chosen_);
  if (!made) {  // back to what ran (its room was just freed), and say why
    auto again = create_model(c_.model, c_.batch, c_.seq_len, chosen_);
    if (!again) return again.err();
    model_.emplace(std::move(*again));
  } else {
    model_.emplace(std::move(*made));
    c_.grad_accum *= factor;
    c_.batch = batch;
  }
  std::copy(kept.begin(), kept.end(), model_->params().begin());
  if (o_.stop) model_->set_interrupt(stop_interrupt(o_, step_started_));
  if (!made) return make_error(made.code(), fmt("micro-batch %d: %s", batch, made.err().message.c_str()));
  lo_.batch = static_cast<std::size_t>(c_.batch);
  if (ld_) {  // the same windows from here, in smaller pieces
    auto again = shards::loader::create(*ds_, lo_, ld_->position());
    if (!again) return again.err();
    *ld_ = std::move(*again);
    size_buffers();
  }
  return ok_status();
}

// Under memory (or CPU) pressure the run first does the same work in smaller
// pieces: half the micro-batch, twice the accumulation, the tokens per step
// and the schedule unchanged. A group agrees on its micro-batch, and
// micro-batch 1 cannot shrink: then the scheduler's pause is what is left.
status run::shed() {
  if (!o_.shed) return ok_status();
  const std::string why = o_.shed();
  if (why.empty()) return ok_status();
  if (world_ > 1 || c_.batch < 2) {
    if (!shed_exhausted_ && o_.on_notice)
      o_.on_notice("load_shed", why + (world_ > 1 ? fmt(": micro-batch %d kept (a group of %u agrees on it)", c_.batch, world_)
                                                  : std::string(": micro-batch 1 already; nothing left to lower")));
    shed_exhausted_ = true;
    return ok_status();
  }
  const int b = c_.batch, a = c_.grad_accum;
  if (auto st = rebatch(b / 2); !st) {
    if (!model_) return st.err();  // not even the old size could be made again
    if (o_.on_notice) o_.on_notice("load_shed", why + ": micro-batch " + std::to_string(b) + " kept (" + st.err().message + ")");
    shed_exhausted_ = true;
    return ok_status();
  }
  const std::string text = why + fmt(": micro-batch %d -> %d, accumulation %d -> %d (%zu tokens per step unchanged) "
                                     "from step %llu",
                                     b, c_.batch, a, c_.grad_accum, bt_ * std::size_t(c_.grad_accum),
                                     static_cast<unsigned long long>(step_ + 1));
  say(o_, "load shedding: " + text);
  if (o_.on_notice) o_.on_notice("load_shed", text);
  return ok_status();
}

// Tokens with sft_masked_bit are context, not targets (sft_data.hpp). A window
// that holds no target at all (inside a long prompt) trains on every token.
void run::unpack(int k) {
  const bool sft = c_.format == "sft";
  float total = 0;
  for (std::size_t i = 0; i < bt_; ++i) {
    inputs_[k][i] = static_cast<std::int32_t>(in_u_[i] & ~sft_masked_bit);
    targets_[k][i] = static_cast<std::int32_t>(tg_u_[i] & ~sft_masked_bit);
    if (sft) total += weights_[k][i] = (tg_u_[i] & sft_masked_bit) ? 0.0f : 1.0f;
  }
  if (sft && total == 0) std::fill(weights_[k].begin(), weights_[k].end(), 1.0f);
}

status run::snapshot(std::uint64_t step) {
  train_state st;
  st.step = step;
  st.config_hash = run_hash_;
  st.schedule = schedule_;
  st.seed = c_.seed;
  st.cursor = ld_->position();
  st.threads = threads_;
  st.tokens_seen = tokens_seen_;
  st.last_loss = sum_.last_loss;
  st.precision = sum_.precision;
  st.micro_batch = c_.batch;
  st.skipped = skipped_;
  auto dir = save_snapshot(ckpt_root_, *model_, *opt_, st, key_, c_.keep);
  if (!dir) return dir.err();
  sum_.snapshot = *dir;
  if (o_.on_snapshot) o_.on_snapshot(*dir);
  return ok_status();
}

// Rolls back to the last snapshot after an anomalous step and marks its batch
// to be skipped; the metrics log and the spike window go back with it.
status run::roll_back(shards::cursor bad_batch, const std::string& why) {
  if (lead_ && sum_.snapshot.empty()) return make_error(errc::internal, why + "; no snapshot to roll back to");
  if (rollbacks_ >= c_.max_rollbacks)
    return make_error(errc::internal, why + fmt("; %d rollbacks already (anomaly.max_rollbacks)", rollbacks_));
  // The others go back to rank 0's latest: published before this step's all-reduce.
  auto back = open_snapshot(lead_ ? sum_.snapshot : ckpt_root_, key_);
  if (!back && !lead_ && back.code() == errc::not_found)
    return make_error(errc::internal, why + "; no snapshot to roll back to");
  if (!back) return back.err();
  if (auto st = load_params(*back, *model_); !st) return st;
  if (auto st = load_optimizer(*back, *opt_); !st) return st;
  ++rollbacks_;
  const std::uint64_t bad_step = step_ + 1;
  skipped_ = back->state.skipped;
  skipped_.push_back(bad_batch);
  step_ = back->state.step;
  tokens_seen_ = back->state.tokens_seen;
  sum_.last_loss = back->state.last_loss;
  auto again = shards::loader::create(*ds_, lo_, back->state.cursor);
  if (!again) return again.err();
  *ld_ = std::move(*again);
  auto kept = lead_ ? metrics_.open(metrics_path_, step_) : metrics_log::read_losses(metrics_path_, step_);
  if (!kept) return kept.err();
  recent_ = std::move(*kept);
  const std::string back_to = fmt("; rolled back to step %llu", static_cast<unsigned long long>(step_));
  say(o_, why + back_to + fmt(", skipping that batch (epoch %llu, window %llu)",
                              static_cast<unsigned long long>(bad_batch.epoch),
                              static_cast<unsigned long long>(bad_batch.position)));
  if (o_.on_rollback) o_.on_rollback(bad_step, step_, why);
  if (o_.on_notice) o_.on_notice("rollback", why + back_to);
  return ok_status();
}

status run::loop() {
  last_snapshot_time_ = clock_type::now();
  const bool outer = o_.outer.start && step_ < total_;
  if (outer) {
    if (o_.outer.write_initial && !resumed_ && step_ == 0)
      if (auto st = snapshot(0); !st) return st;
    if (auto st = o_.outer.start(model_->params()); !st) {
      if (!(o_.stop && o_.stop->load())) return st;
      sum_.stopped = true;  // stopped while joining: nothing trained
      say(o_, "stopped while joining the aggregation: " + st.err().message);
      return ok_status();
    }
  }
  if (o_.on_started) o_.on_started();
  while (step_ < total_) {
    auto more = one_step();
    if (!more) return more.err();
    if (!*more) break;
  }
  if (outer && step_ == total_ && !sum_.stopped) {
    if (auto st = o_.outer.finish(step_, model_->params()); !st) {
      if (!(o_.stop && o_.stop->load())) return st;
      sum_.stopped = true;  // stopped before the last sync: the next run trains from the last snapshot
      say(o_, "stopped while taking the global parameters: " + st.err().message);
      return ok_status();
    }
    if (auto st = snapshot(step_); !st) return st;
  }
  return ok_status();
}

// One optimiser step; a batch marked skipped and a rolled-back step count as
// steps of the loop that did not move `step_`. False when the run stops here.
result<bool> run::one_step() {
  if (auto st = shed(); !st) return st.err();
  const auto t0 = clock_type::now();
  step_started_ = t0;
  const shards::cursor at = ld_->position();
  const bool skip = std::find(skipped_.begin(), skipped_.end(), at) != skipped_.end();
  for (int k = 0; k < c_.grad_accum; ++k) {
    if (auto st = ld_->next(in_u_, tg_u_); !st) return st.err();
    if (static_cast<std::uint32_t>(k) % world_ == g_.rank) unpack(k / static_cast<int>(world_));
  }
  if (skip) return true;  // a batch an earlier rollback marked; the step count does not move
  const engine::data_parallel* dp = g_.world > 1 ? &dp_ : nullptr;
  auto s = engine::train_step(*model_, *opt_, schedule_, c_.grad_clip, static_cast<int>(step_), micro_, dp);
  if (!s && o_.stop && o_.stop->load()) {
    // Stopped inside this step (the model's interrupt, or the group's
    // exchange): the parameters are still the last step's, so rank 0
    // snapshots them — with the data cursor put back before this step's
    // batches — and the run ends stopped.
    if (lead_ && step_ > sum_.first_step && sum_.snapshot.find(ckpt::step_dir_name(step_)) == std::string::npos) {
      auto back = shards::loader::create(*ds_, lo_, at);
      if (!back) return back.err();
      *ld_ = std::move(*back);
      if (auto st = snapshot(step_); !st) return st.err();
    }
    sum_.stopped = true;
    say(o_, fmt("stopped at step %llu (inside step %llu, which is discarded)", static_cast<unsigned long long>(step_),
                static_cast<unsigned long long>(step_ + 1)));
    return false;
  }
  if (!s) return s.err();
  if (o_.fault)
    if (auto f = o_.fault(step_ + 1)) s->loss = *f;
  if (const std::string why = step_anomaly(*s, step_ + 1, recent_, c_.spike_window, c_.spike_zscore); !why.empty()) {
    if (o_.on_anomaly) o_.on_anomaly(std::isfinite(s->loss) && std::isfinite(s->grad_norm) ? "spike" : "non_finite");
    if (auto st = roll_back(at, why); !st) return st.err();
    return true;
  }
  recent_.push_back(s->loss);
  ++step_;
  const double ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
  tokens_seen_ += bt_ * std::size_t(c_.grad_accum);
  sum_.last_loss = s->loss;
  step_record rec{step_, s->loss, s->lr, s->grad_norm, double(bt_ * c_.grad_accum) / (ms / 1000.0), ms};
  if (lead_)
    if (auto st = metrics_.append(rec); !st) return st.err();
  if (o_.outer.after_step)
    if (auto st = o_.outer.after_step(step_, model_->params(), bt_ * std::size_t(c_.grad_accum)); !st) return st.err();
  if (o_.on_step) o_.on_step(rec);
  if (step_ % log_every_ == 0 || step_ == sum_.first_step + 1 || step_ == total_)
    say(o_, fmt("step %6llu/%llu  loss %.4f  lr %.2e  norm %.3f  %.0f tok/s  %.1f ms",
                static_cast<unsigned long long>(step_), static_cast<unsigned long long>(total_), double(s->loss),
                double(s->lr), double(s->grad_norm), rec.tokens_per_s, ms));
  const bool stopping = o_.stop && o_.stop->load();
  const bool by_steps = c_.every_steps > 0 && step_ % static_cast<std::uint64_t>(c_.every_steps) == 0;
  const bool by_time = c_.every_seconds > 0 && clock_type::now() - last_snapshot_time_ >=
                                                   std::chrono::duration<double>(c_.every_seconds);
  const bool outer_last = o_.outer.finish && step_ == total_;  // its snapshot comes after finish (loop())
  if (lead_ && !outer_last && (by_steps || by_time || step_ == total_ || stopping)) {
    if (auto st = snapshot(step_); !st) return st.err();
    last_snapshot_time_ = clock_type::now();
  }
  if (stopping && step_ < total_) {
    sum_.stopped = true;
    say(o_, fmt("stopped at step %llu; snapshot %s", static_cast<unsigned long long>(step_), sum_.snapshot.c_str()));
    return false;
  }
  return true;
}

run_summary run::finish() {
  sum_.steps = step_;
  const auto* bytes = reinterpret_cast<const char*>(model_->params().data());
  sum_.params_sha256 = crypto::sha256_hex(std::string_view(bytes, model_->params().size() * sizeof(float)));
  return sum_;
}

}  // namespace

result<run_summary> run_training(const runspec::run_config& c, const run_options& o) {
  if (c.alignment()) return run_alignment(c, o);
  run r(c, o);
  return r.go();
}

}  // namespace loom::trainer
