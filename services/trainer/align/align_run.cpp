#include "services/trainer/align/align_run.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "services/trainer/align/dpo.hpp"
#include "services/trainer/align/grpo.hpp"
#include "services/trainer/align/pair_stream.hpp"
#include "services/trainer/align/reward_model.hpp"
#include "libs/engine/kernels.hpp"
#include "services/trainer/align/align_inputs.hpp"
#include "services/trainer/run/metrics_log.hpp"
#include "services/trainer/run/run_support.hpp"
#include "services/trainer/run/snapshot_io.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

namespace loom::trainer {
namespace {

using clock_type = std::chrono::steady_clock;
using metrics = std::vector<std::pair<std::string, double>>;
constexpr const char* head_file = "reward_head.safetensors";

// One alignment run, in the order it happens. Not movable (drivers hold references).
class align_run {
 public:
  align_run(const runspec::run_config& c, const run_options& o) : c_(c), o_(o) {}
  align_run(const align_run&) = delete;
  align_run& operator=(const align_run&) = delete;

  result<run_summary> go() {
    for (auto step : {&align_run::prepare, &align_run::build, &align_run::resume_or_init, &align_run::open_log})
      if (auto st = (this->*step)(); !st) return st.err();
    if (auto st = loop(); !st) return st.err();
    return finish();
  }

 private:
  status prepare();         // checks, threads, key, data, run hash
  status build();           // the models and optimisers of the kind
  status resume_or_init();  // a snapshot, or init_from / random (+ reference, reward model)
  status open_log();        // metrics.jsonl, the pair stream at its cursor, the "before" evaluation
  status loop();
  result<metrics> one_step(float& loss, float& lr, float& norm);  // the kind's optimiser step
  result<metrics> evaluate();
  status snapshot();
  status load_into(const std::string& path, engine::gpt2& m, const std::string& key);
  result<run_summary> finish();

  runspec::run_config c_;
  const run_options& o_;
  std::string ckpt_root_, key_, run_hash_;
  int threads_ = 1;
  align_inputs in_;
  std::optional<engine::gpt2> model_, ref_, rm_;  // policy or backbone; reference; rl's reward model
  std::optional<align::reward_head> head_, rm_head_;
  std::optional<engine::adamw> opt_, head_opt_;
  std::optional<align::pair_stream> stream_;
  std::optional<align::reward_driver> rm_driver_, rl_reward_driver_;
  std::optional<align::dpo_driver> dpo_;
  std::optional<align::grpo_driver> grpo_;
  std::optional<opened_snapshot> resumed_;
  metrics_log log_;
  engine::lr_schedule schedule_;
  std::uint64_t step_ = 0, tokens_ = 0;
  run_summary sum_;
  metrics before_;
  clock_type::time_point step_started_ = clock_type::now(), last_snapshot_ = clock_type::now();
};

status align_run::prepare() {
  if (c_.out_dir.empty())
    return make_error(errc::invalid_argument, "no output directory: set output.dir or pass --out DIR");
  if (o_.group.world > 1)
    return make_error(errc::invalid_argument, "kind " + c_.kind + " runs on one trainer: set parallel.trainers = 1");
  if (auto st = files::make_dirs(c_.out_dir); !st) return st;
  ckpt_root_ = c_.out_dir + "/checkpoints";
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (c_.threads > cores)
    return make_error(errc::invalid_argument, fmt("train.threads %d exceeds this machine's %d cores", c_.threads, cores));
  threads_ = c_.threads > 0 ? c_.threads : cores;
  const auto need = c_.memory();
  const std::uint64_t limit = o_.memory_limit ? o_.memory_limit : machine_memory() / 4 * 3;
  if (need.total() > limit)
    return make_error(errc::resource_exhausted, "this run needs an estimated " + need.describe() +
                                                    " but this machine can give it " + model::format_bytes(limit) +
                                                    ": lower train.batch or train.seq_len");
  engine::kernels::set_threads(threads_);
  auto in = load_align_inputs(c_);
  if (!in) return in.err();
  in_ = std::move(*in);
  run_hash_ = crypto::sha256_hex(c_.math_hash() + "|" + in_.identity + "|threads=" + std::to_string(threads_));
  auto key = checkpoint_key(o_.data_dir, ckpt_root_);
  if (!key) return key.err();
  key_ = *key;
  return ok_status();
}

status align_run::build() {
  const int rows = c_.kind == "rl" ? c_.batch : 2 * c_.batch;
  // train.precision for the policy and its frozen reference alike (masters stay fp32).
  engine::precision_choice chosen = resolve_precision(c_.precision);
  for (auto* m : {&model_, &ref_}) {
    if (m == &ref_ && c_.kind == "rm") break;
    auto made = create_model(c_.model, rows, c_.seq_len, chosen);
    if (!made) return made.err();
    m->emplace(std::move(*made));
  }
  (void)model_->set_precision(chosen.used);  // the reference fell back to fp32: the policy with it
  sum_.precision = std::string(engine::to_string(chosen.used));
  report_precision(o_, chosen);
  if (o_.stop)
    model_->set_interrupt(stop_interrupt(o_, step_started_));
  opt_.emplace(model_->params().size(), adam_of(c_), model_->layout().ranges());
  schedule_ = schedule_of(c_);
  if (c_.kind == "rm") {
    head_.emplace(c_.model.channels);
    head_->init(c_.seed);
    head_opt_.emplace(head_->params().size(), adam_of(c_), head_->ranges());
    rm_driver_.emplace(*model_, *head_);
  } else if (c_.kind == "dpo") {
    align::dpo_options d{c_.align.beta, c_.align.loss == "ipo" ? align::preference_loss::ipo : align::preference_loss::dpo};
    dpo_.emplace(*model_, *ref_, d);
  }
  return ok_status();
}

status align_run::load_into(const std::string& path, engine::gpt2& m, const std::string& what) {
  auto from = open_snapshot(path, key_);
  if (!from) return make_error(from.code(), what + " " + path + ": " + from.err().message);
  report_warnings(o_, from->where, what + " " + from->where.dir);
  if (auto st = load_params(*from, m); !st) return make_error(st.code(), what + " " + path + ": " + st.err().message);
  return ok_status();
}

status align_run::resume_or_init() {
  if (o_.resume) {
    auto snap = open_snapshot(ckpt_root_, key_);
    if (snap) resumed_.emplace(std::move(*snap));
    else if (snap.code() != errc::not_found) return snap.err();
  } else if (has_snapshots(ckpt_root_)) {
    return make_error(errc::already_exists, ckpt_root_ + " already holds snapshots: pass --resume to continue "
                                                         "that run, or choose another output directory");
  }
  // The frozen pieces first: the reference and rl's reward model never change.
  if (ref_) {
    const std::string ref = c_.align.reference.empty() ? c_.init_from : c_.align.reference;
    if (auto st = load_into(ref, *ref_, "align.reference"); !st) return st;
  }
  if (c_.kind == "rl") {
    align::grpo_options g;
    g.group = c_.align.samples_per_prompt;
    g.temperature = c_.align.temperature;
    g.top_k = c_.align.top_k;
    g.max_new_tokens = c_.align.max_new_tokens;
    g.stop_token = in_.stop_token;
    g.kl_coef = c_.align.kl_coef;
    align::reward_fn reward;
    if (!c_.align.reward_model.empty()) {
      const std::string& p = c_.align.reward_model;
      auto rm = open_snapshot(p, key_);
      if (!rm) return make_error(rm.code(), "reward.model " + p + ": " + rm.err().message);
      auto head = read_extra(*rm, head_file);
      if (!head && head.code() == errc::not_found)
        return make_error(errc::invalid_argument, "reward.model " + p + " is not a reward-model checkpoint (" +
                                                      rm->where.dir + " has no " + head_file +
                                                      "): give an rm stage's checkpoints");
      if (!head) return head.err();
      engine::precision_choice rm_precision{sum_.precision == "bf16" ? engine::precision::bf16 : engine::precision::fp32,
                                            "as the policy"};
      auto made = create_model(rm->model, c_.batch, c_.seq_len, rm_precision);
      if (!made) return made.err();
      rm_.emplace(std::move(*made));
      if (auto st = load_params(*rm, *rm_); !st) return st;
      rm_head_.emplace(rm->model.channels);
      if (auto st = rm_head_->load(*head); !st) return make_error(st.code(), "reward.model " + p + ": " + st.err().message);
      rl_reward_driver_.emplace(*rm_, *rm_head_);
      reward = align::reward_model_reward(*rl_reward_driver_);
    } else {
      reward = rule_reward(c_.align, in_);
    }
    grpo_.emplace(*model_, *ref_, std::move(reward), g);
  }
  if (!resumed_) {
    if (c_.init_from.empty()) {
      model_->init_random(c_.seed);
      return ok_status();
    }
    return load_into(c_.init_from, *model_, "model.init_from");
  }
  const opened_snapshot& r = *resumed_;
  report_warnings(o_, r.where, "resumed from " + r.where.dir);
  if (r.state.config_hash != run_hash_)
    return make_error(errc::conflict, r.where.dir + " was made by a different configuration, data or thread count: "
                                                    "resuming would not continue that run");
  if (auto st = load_params(r, *model_); !st) return st;
  if (auto st = load_optimizer(r, *opt_); !st) return st;
  note_precision_change(o_, r.where.dir, r.state.precision, sum_.precision);
  if (head_) {
    auto f = read_extra(r, head_file);
    if (!f) return f.err();
    if (auto st = head_->load(*f); !st) return st;
    if (auto st = load_optimizer(*f, r.where.dir + "/" + head_file, *head_opt_, "head_adamw"); !st) return st;
  }
  if (auto st = set_aside_newer(ckpt_root_, r.state.step, o_); !st) return st;
  sum_.first_step = step_ = r.state.step;
  tokens_ = r.state.tokens_seen;
  sum_.last_loss = r.state.last_loss;
  sum_.snapshot = r.where.dir;
  say(o_, fmt("resumed from %s (step %llu)", r.where.dir.c_str(), static_cast<unsigned long long>(step_)));
  return ok_status();
}

status align_run::open_log() {
  auto kept = log_.open(c_.out_dir + "/metrics.jsonl", step_);
  if (!kept) return kept.err();
  if (c_.kind != "rl") {
    auto s = align::pair_stream::create(in_.train, c_.batch, c_.seq_len, c_.seed);
    if (!s) return s.err();
    stream_.emplace(std::move(*s));
    if (resumed_)
      if (auto st = stream_->seek({resumed_->state.cursor.epoch, resumed_->state.cursor.position}); !st) return st;
  }
  // The held-out metrics before any step: computed once, kept beside the log.
  const std::string before_path = c_.out_dir + "/eval_before.json";
  if (step_ == 0) {
    auto m = evaluate();
    if (!m) return m.err();
    before_ = *m;
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : before_) j[k] = v;
    if (auto st = files::write_atomic(before_path, j.dump() + "\n"); !st) return st;
  } else if (auto text = files::read_file(before_path); text) {
    try {
      const nlohmann::json j = nlohmann::json::parse(*text);
      for (const auto& [k, v] : j.items()) before_.emplace_back(k, v.get<double>());
    } catch (const std::exception&) {
      before_.clear();  // a missing or torn file only loses the "before" figures
    }
  }
  say(o_, fmt("%s: L%d H%d C%d, %zu training pairs, %zu held-out batches, steps %llu..%d, %d threads", c_.kind.c_str(),
              c_.model.layers, c_.model.heads, c_.model.channels, in_.train.size(), in_.held_out.size(),
              static_cast<unsigned long long>(step_ + 1), c_.steps, threads_));
  return ok_status();
}


// The rl stage's prompts for step s (0-based): a window that walks the
// training prompts in order, B / k of them per step.
std::span<const std::vector<std::int32_t>> prompts_at(const align_inputs& in, int per_step, std::uint64_t s) {
  const std::size_t n = in.train_prompts.size() / std::size_t(per_step);
  return std::span(in.train_prompts).subspan((s % n) * std::size_t(per_step), std::size_t(per_step));
}

result<metrics> align_run::one_step(float& loss, float& lr, float& norm) {
  const int step = static_cast<int>(step_);
  if (c_.kind == "rl") {
    const int per = c_.batch / c_.align.samples_per_prompt;
    auto r = grpo_->step(*opt_, schedule_, c_.grad_clip, step, prompts_at(in_, per, step_),
                         c_.seed * 7919 + step_);
    if (!r) return r.err();
    loss = float(-r->mean_reward);
    lr = r->lr;
    norm = r->grad_norm;
    return metrics{{"mean_reward", r->mean_reward}, {"reward_std", r->reward_std}, {"kl", r->kl},
                   {"mean_length", r->mean_length}};
  }
  std::vector<align::pair_batch> micro;
  for (int k = 0; k < c_.grad_accum; ++k) {
    auto b = stream_->next();
    if (!b) return b.err();
    micro.push_back(std::move(*b));
  }
  if (c_.kind == "rm") {
    auto r = rm_driver_->step(*opt_, *head_opt_, schedule_, c_.grad_clip, step, micro);
    if (!r) return r.err();
    loss = float(r->bt.loss);
    lr = r->lr;
    norm = r->grad_norm;
    return metrics{{"accuracy", r->bt.accuracy}, {"margin", r->bt.margin}};
  }
  auto r = dpo_->step(*opt_, schedule_, c_.grad_clip, step, micro);
  if (!r) return r.err();
  loss = float(r->m.pref.loss);
  lr = r->lr;
  norm = r->grad_norm;
  return metrics{{"accuracy", r->m.pref.accuracy},
                 {"reward_margin", r->m.pref.reward_margin},
                 {"chosen_reward", r->m.pref.chosen_reward},
                 {"rejected_reward", r->m.pref.rejected_reward},
                 {"policy_accuracy", r->m.pref.policy_accuracy}};
}

// Held-out metrics: rm and dpo over the held-out batches, rl over the first
// held-out prompts (at most 4 batches) with fixed sampling seeds.
result<metrics> align_run::evaluate() {
  if (c_.kind == "rm") {
    auto r = rm_driver_->evaluate(in_.held_out);
    if (!r) return r.err();
    return metrics{{"loss", r->loss}, {"accuracy", r->accuracy}, {"margin", r->margin}};
  }
  if (c_.kind == "dpo") {
    auto r = dpo_->evaluate(in_.held_out);
    if (!r) return r.err();
    return metrics{{"loss", r->pref.loss},
                   {"accuracy", r->pref.accuracy},
                   {"reward_margin", r->pref.reward_margin},
                   {"policy_accuracy", r->pref.policy_accuracy},
                   {"kl", r->kl}};
  }
  const int per = c_.batch / c_.align.samples_per_prompt;
  const std::size_t batches = std::min<std::size_t>(4, in_.eval_prompts.size() / std::size_t(per));
  double mean = 0, m2 = 0, kl = 0, ent = 0, len = 0;
  for (std::size_t i = 0; i < batches; ++i) {
    auto r = grpo_->evaluate(std::span(in_.eval_prompts).subspan(i * std::size_t(per), std::size_t(per)),
                             c_.seed * 1000 + i);
    if (!r) return r.err();
    mean += r->mean_reward;
    m2 += r->reward_std * r->reward_std + r->mean_reward * r->mean_reward;
    kl += r->kl;
    ent += r->entropy;
    len += r->mean_length;
  }
  const double n = double(std::max<std::size_t>(1, batches));
  mean /= n;
  return metrics{{"mean_reward", mean},
                 {"reward_std", std::sqrt(std::max(0.0, m2 / n - mean * mean))},
                 {"kl", kl / n},
                 {"entropy", ent / n},
                 {"mean_length", len / n}};
}

status align_run::snapshot() {
  train_state st;
  st.step = step_;
  st.config_hash = run_hash_;
  st.schedule = schedule_;
  st.seed = c_.seed;
  if (stream_) st.cursor = {stream_->position().epoch, stream_->position().next};
  st.threads = threads_;
  st.tokens_seen = tokens_;
  st.last_loss = sum_.last_loss;
  st.precision = sum_.precision;
  std::vector<extra_file> extras;
  if (head_) {
    extra_file f{head_file, head_->tensors(), {{"kind", "rm"}}};
    add_optimizer(f, *head_opt_, "head_adamw");
    extras.push_back(std::move(f));
  }
  auto dir = save_snapshot(ckpt_root_, *model_, *opt_, st, key_, c_.keep, extras);
  if (!dir) return dir.err();
  sum_.snapshot = *dir;
  last_snapshot_ = clock_type::now();
  if (o_.on_snapshot) o_.on_snapshot(*dir);
  return ok_status();
}

status align_run::loop() {
  if (o_.on_started) o_.on_started();
  const std::uint64_t total = static_cast<std::uint64_t>(c_.steps);
  const std::uint64_t log_every = std::max<std::uint64_t>(1, total / 20);
  const std::size_t rows = std::size_t(c_.kind == "rl" ? c_.batch : 2 * c_.batch) * std::size_t(c_.grad_accum);
  while (step_ < total) {
    const auto t0 = clock_type::now();
    step_started_ = t0;
    const auto at = stream_ ? stream_->position() : align::pair_cursor{};
    float loss = 0, lr = 0, norm = 0;
    auto m = one_step(loss, lr, norm);
    if (!m && o_.stop && o_.stop->load()) {  // interrupted inside the step: nothing of it is kept
      if (stream_)
        if (auto st = stream_->seek(at); !st) return st;
      if (step_ > sum_.first_step && sum_.snapshot.find(ckpt::step_dir_name(step_)) == std::string::npos)
        if (auto st = snapshot(); !st) return st;
      sum_.stopped = true;
      return ok_status();
    }
    if (!m) return m.err();
    if (!std::isfinite(loss) || !std::isfinite(norm))
      return make_error(errc::internal, fmt("%s step %llu: loss %g, gradient norm %g: not finite", c_.kind.c_str(),
                                            static_cast<unsigned long long>(step_ + 1), double(loss), double(norm)));
    ++step_;
    tokens_ += rows * std::size_t(c_.seq_len);
    sum_.last_loss = loss;
    const double ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
    step_record rec{step_, loss, lr, norm, double(rows * std::size_t(c_.seq_len)) / (ms / 1000.0), ms, std::move(*m)};
    if (c_.align.eval_every > 0 && step_ % std::uint64_t(c_.align.eval_every) == 0 && step_ < total) {
      auto e = evaluate();
      if (!e) return e.err();
      for (const auto& [k, v] : *e) rec.extra.emplace_back("eval_" + k, v);
    }
    if (auto st = log_.append(rec); !st) return st;
    if (o_.on_step) o_.on_step(rec);
    if (step_ % log_every == 0 || step_ == sum_.first_step + 1 || step_ == total) {
      std::string line = fmt("step %6llu/%llu  loss %.4f", static_cast<unsigned long long>(step_),
                             static_cast<unsigned long long>(total), double(loss));
      for (const auto& [k, v] : rec.extra) line += fmt("  %s %.4f", k.c_str(), v);
      say(o_, line + fmt("  %.1f ms", ms));
    }
    const bool stopping = o_.stop && o_.stop->load();
    const bool by_steps = c_.every_steps > 0 && step_ % static_cast<std::uint64_t>(c_.every_steps) == 0;
    const bool by_time = c_.every_seconds > 0 &&
                         clock_type::now() - last_snapshot_ >= std::chrono::duration<double>(c_.every_seconds);
    if (by_steps || by_time || step_ == total || stopping)
      if (auto st = snapshot(); !st) return st;
    if (stopping && step_ < total) {
      sum_.stopped = true;
      return ok_status();
    }
  }
  return ok_status();
}

result<run_summary> align_run::finish() {
  sum_.steps = step_;
  const auto* bytes = reinterpret_cast<const char*>(model_->params().data());
  sum_.params_sha256 = crypto::sha256_hex(std::string_view(bytes, model_->params().size() * sizeof(float)));
  if (sum_.stopped) return sum_;
  auto after = evaluate();
  if (!after) return after.err();
  sum_.eval = *after;
  nlohmann::json j = {{"kind", c_.kind}, {"step", step_}, {"before", nlohmann::json::object()},
                      {"after", nlohmann::json::object()}};
  for (const auto& [k, v] : before_) j["before"][k] = v;
  for (const auto& [k, v] : *after) j["after"][k] = v;
  std::string line = "held-out:";
  for (const auto& [k, v] : *after) {
    line += fmt("  %s %.4f", k.c_str(), v);
    if (k == "kl" && c_.align.kl_bound > 0) {
      j["kl_within_bound"] = v <= c_.align.kl_bound;
      if (v > c_.align.kl_bound && o_.on_notice)
        o_.on_notice("kl_bound", fmt("KL to the reference %.4f exceeds align.kl_bound %.4f", v, c_.align.kl_bound));
    }
  }
  say(o_, line);
  if (auto st = files::write_atomic(c_.out_dir + "/eval.json", j.dump(1) + "\n"); !st) return st.err();
  return sum_;
}

}  // namespace

result<run_summary> run_alignment(const runspec::run_config& c, const run_options& o) {
  align_run r(c, o);
  return r.go();
}

}  // namespace loom::trainer
