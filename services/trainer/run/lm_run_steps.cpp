// lm_run's step loop (lm_run.hpp): one optimiser step at a time, the
// anomaly rollback, load shedding (a smaller micro-batch with the same tokens
// per step), snapshots and the summary at the end.
#include "services/trainer/run/lm_run.hpp"

#include "libs/ckpt/snapshot.hpp"
#include "libs/crypto/hash.hpp"
#include "services/trainer/run/sft_data.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace loom::trainer::detail {

status lm_run::rebatch(int batch) {
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
status lm_run::shed() {
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
void lm_run::unpack(int k) {
  const bool sft = c_.format == "sft";
  float total = 0;
  for (std::size_t i = 0; i < bt_; ++i) {
    inputs_[k][i] = static_cast<std::int32_t>(in_u_[i] & ~sft_masked_bit);
    targets_[k][i] = static_cast<std::int32_t>(tg_u_[i] & ~sft_masked_bit);
    if (sft) total += weights_[k][i] = (tg_u_[i] & sft_masked_bit) ? 0.0f : 1.0f;
  }
  if (sft && total == 0) std::fill(weights_[k].begin(), weights_[k].end(), 1.0f);
}

status lm_run::snapshot(std::uint64_t step) {
  train_state st;
  st.step = step;
  st.config_hash = run_hash_;
  st.schedule = schedule_;
  st.seed = c_.seed;
  st.cursor = shared(ld_->position());
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
status lm_run::roll_back(shards::cursor bad_batch, const std::string& why) {
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
  auto again = loader_at(back->state.cursor);
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

status lm_run::loop() {
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
  if (o_.resume_at_most > 0 && resumed_ && step_ == o_.resume_at_most && o_.outer.after_step && !outer) {
    // An hpo segment resumed at its end (its report was lost): score it again, train nothing.
    return o_.outer.after_step(step_, model_->params(), 0);
  }
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
result<bool> lm_run::one_step() {
  if (auto st = shed(); !st) return st.err();
  const auto t0 = clock_type::now();
  step_started_ = t0;
  const shards::cursor at = ld_->position();
  const bool skip = std::find(skipped_.begin(), skipped_.end(), shared(at)) != skipped_.end();
  for (int k = 0; k < c_.grad_accum; ++k) {
    const bool mine = static_cast<std::uint32_t>(k) % world_ == g_.rank;
    if (c_.local && !mine) continue;  // read by its member, from that node's share
    if (auto st = ld_->next(in_u_, tg_u_); !st) return st.err();
    if (mine) unpack(k / static_cast<int>(world_));
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
  if (const std::string why = step_anomaly(*s, step_ + 1, recent_, {c_.spike_window, c_.spike_zscore, c_.diverge_ratio});
      !why.empty()) {
    if (o_.on_anomaly)
      o_.on_anomaly(!std::isfinite(s->loss) || !std::isfinite(s->grad_norm) ? "non_finite"
                    : why.find(" diverged: ") != std::string::npos        ? "diverged"
                                                                            : "spike");
    if (auto st = roll_back(shared(at), why); !st) return st.err();
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

run_summary lm_run::finish() {
  sum_.steps = step_;
  const auto* bytes = reinterpret_cast<const char*>(model_->params().data());
  sum_.params_sha256 = crypto::sha256_hex(std::string_view(bytes, model_->params().size() * sizeof(float)));
  return sum_;
}


}  // namespace loom::trainer::detail
