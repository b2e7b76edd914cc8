#include "services/trainer/run/training_run.hpp"
#include "services/trainer/align/align_run.hpp"
#include "services/trainer/run/lm_run.hpp"
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
namespace detail {

status lm_run::check_shape() {
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

status lm_run::check_limits() {
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

status lm_run::prepare_data() {
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
  if (c_.local && o_.node.empty())
    return make_error(errc::invalid_argument, "data.local: this trainer has no node id (run it in the trainer service)");
  auto ds = c_.local ? shards::dataset::open_placed(data_dir_, o_.node, shards::verify::eager)
                     : shards::dataset::open(data_dir_, shards::verify::eager);
  if (!ds) return ds.err();
  ds_.emplace(std::move(*ds));
  say_locality();
  auto data_id = data_identity(data_dir_, c_.local);
  if (!data_id) return data_id.err();
  run_hash_ = crypto::sha256_hex(c_.math_hash() + "|" + *data_id + "|threads=" + std::to_string(threads_));
  auto key = checkpoint_key(o_.data_dir, ckpt_root_);  // never made anew while snapshots here need the old one
  if (!key) return key.err();
  key_ = *key;
  return ok_status();
}

status lm_run::build_model() {
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

// The newest snapshot is past the segment's end: the newest at or below it
// instead (each older step tried, newest first), or none — then the run
// starts afresh, and the snapshots above move aside either way.
status lm_run::resume_at_or_below(std::uint64_t limit) {
  const std::uint64_t newest = resumed_->state.step;
  resumed_.reset();
  std::vector<std::uint64_t> steps;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ckpt_root_, ec))
    if (auto n = ckpt::parse_step_dir(e.path().filename().string()); n && *n <= limit) steps.push_back(*n);
  std::sort(steps.rbegin(), steps.rend());
  for (auto n : steps) {
    auto snap = open_snapshot(ckpt_root_ + "/" + ckpt::step_dir_name(n), key_);
    if (snap) {
      resumed_.emplace(std::move(*snap));
      break;
    }
    say(o_, "snapshot " + ckpt::step_dir_name(n) + " refused: " + snap.err().message);
  }
  say(o_, fmt("the newest snapshot (step %llu) is past this segment's end at step %llu: %s",
              static_cast<unsigned long long>(newest), static_cast<unsigned long long>(limit),
              resumed_ ? ("resuming from " + resumed_->where.dir).c_str() : "starting afresh"));
  if (!resumed_) return set_aside_newer(ckpt_root_, 0, o_);
  return ok_status();  // resume_or_init sets the newer ones aside once it has loaded this one
}

status lm_run::resume_or_init() {
  if (!lead_) {
    // Opened below, once rank 0 has said which.
  } else if (o_.resume) {
    auto snap = open_snapshot(ckpt_root_, key_);
    if (snap) resumed_.emplace(std::move(*snap));
    else if (snap.code() != errc::not_found) return snap.err();
    else say(o_, "no snapshot under " + ckpt_root_ + ": starting from step 0");
    if (resumed_ && o_.resume_at_most > 0 && resumed_->state.step > o_.resume_at_most)
      if (auto st = resume_at_or_below(o_.resume_at_most); !st) return st;
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

status lm_run::open_loader() {
  lo_.batch = static_cast<std::size_t>(c_.batch);
  lo_.seq_len = static_cast<std::size_t>(c_.seq_len);
  lo_.seed = c_.seed;
  lo_.shuffle = c_.shuffle;
  if (c_.local && c_.grad_accum % static_cast<int>(world_) != 0)
    return make_error(errc::invalid_argument,
                      fmt("data.local in a group of %u needs train.grad_accum a multiple of %u (each member reads the "
                          "same number of batches from its own node's shards), got %d",
                          world_, world_, c_.grad_accum));
  auto ld = loader_at(resumed_ ? resumed_->state.cursor : shards::cursor{});
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
void lm_run::size_buffers() {
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

shards::cursor lm_run::shared(shards::cursor mine) const {
  if (!c_.local) return mine;
  return {0, mine.epoch * ld_->windows_per_epoch() + mine.position};
}

result<shards::loader> lm_run::loader_at(shards::cursor shared) {
  if (!c_.local) return shards::loader::create(*ds_, lo_, shared);
  auto probe = shards::loader::create(*ds_, lo_);
  if (!probe) return probe.err();
  const std::uint64_t w = probe->windows_per_epoch();
  if (shared.epoch != 0)
    return make_error(errc::invalid_argument, "data.local: a snapshot cursor of epoch " + std::to_string(shared.epoch) +
                                                  " was not written by a data.local run");
  return shards::loader::create(*ds_, lo_, shards::cursor{shared.position / w, shared.position % w});
}

void lm_run::say_locality() {
  if (c_.dataset.empty() || o_.node.empty()) return;
  std::uint64_t here = 0, elsewhere = 0;
  std::size_t n_here = 0, n_elsewhere = 0;
  for (const auto& s : ds_->info().shards) {
    (s.node == o_.node ? here : elsewhere) += s.bytes;
    ++(s.node == o_.node ? n_here : n_elsewhere);
  }
  const double total = double(here + elsewhere);
  const std::string text =
      fmt("dataset %s: reads %llu bytes locally (%zu shards placed on node %s) and %llu bytes remotely (%zu shards "
          "placed on other nodes): %.1f%% local%s",
          c_.dataset.c_str(), static_cast<unsigned long long>(here), n_here, o_.node.c_str(),
          static_cast<unsigned long long>(elsewhere), n_elsewhere, total > 0 ? 100.0 * double(here) / total : 100.0,
          c_.local ? " (data.local)" : "");
  say(o_, text);
  if (o_.on_notice) o_.on_notice("data_locality", text);
}

}  // namespace detail

result<run_summary> run_training(const runspec::run_config& c, const run_options& o) {
  if (c.alignment()) return run_alignment(c, o);
  detail::lm_run r(c, o);
  return r.go();
}

}  // namespace loom::trainer
