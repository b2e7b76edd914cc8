#include "services/trainer/run/training_run.hpp"

#include "libs/ckpt/snapshot.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/shards/loader.hpp"
#include "services/trainer/engine/kernels.hpp"
#include "services/trainer/engine/model.hpp"
#include "services/trainer/engine/optimizer.hpp"
#include "services/trainer/engine/train_step.hpp"
#include "services/trainer/run/metrics_log.hpp"
#include "services/trainer/run/sft_data.hpp"
#include "services/trainer/run/snapshot_io.hpp"
#include "services/trainer/run/text_data.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <thread>

namespace loom::trainer {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

void say(const run_options& o, const std::string& line) {
  if (o.log) *o.log << line << std::endl;
}

bool has_snapshots(const std::string& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (ckpt::parse_step_dir(e.path().filename().string())) return true;
  return false;
}

// The identity of the data the run reads: the manifest lists every shard's SHA-256.
result<std::string> data_identity(const std::string& dir) {
  auto text = files::read_file(dir + "/" + std::string(shards::manifest_file_name));
  if (!text) return text.err();
  return crypto::sha256_hex(*text);
}

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// A resumed run will publish steps after `step` again: the snapshots there
// (refused as corrupt, or never committed by LATEST) move to root/refused/,
// out of the way but kept for a human to inspect.
status set_aside_newer(const std::string& root, std::uint64_t step, const run_options& o) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    const auto n = ckpt::parse_step_dir(name);
    if (!n || *n <= step) continue;
    if (auto st = files::make_dirs(root + "/refused"); !st) return st;
    std::string to = root + "/refused/" + name;
    for (int i = 1; fs::exists(to); ++i) to = root + "/refused/" + name + "." + std::to_string(i);
    fs::rename(e.path(), to, ec);
    if (ec) return make_error(errc::internal, "cannot move " + e.path().string() + " aside: " + ec.message());
    say(o, "moved " + name + " (newer than the resumed step) to " + to);
  }
  return files::fsync_dir(root);
}

// A group's start: every member learns the step of the snapshot rank 0
// resumes from (0: none) and checks that all run the same numbers (run_hash).
// One all-reduce of 4 + 32 floats: the step in 16-bit pieces from rank 0, and
// every member's hash bytes, whose sums are world x one's own when all agree.
result<std::uint64_t> agree_start(const run_options::group_member& g, std::uint64_t step, const std::string& run_hash) {
  std::vector<float> v(4 + 32, 0.0f);
  if (g.rank == 0)
    for (int k = 0; k < 3; ++k) v[k] = static_cast<float>((step >> (16 * k)) & 0xffff);
  for (int k = 0; k < 32; ++k) v[4 + k] = static_cast<float>(std::stoi(run_hash.substr(2 * k, 2), nullptr, 16));
  const std::vector<float> mine(v.begin() + 4, v.end());
  if (auto st = g.all_reduce_sum(v); !st) return st.err();
  for (int k = 0; k < 32; ++k)
    if (v[4 + k] != mine[k] * static_cast<float>(g.world))
      return make_error(errc::conflict, fmt("trainer group: member %u's configuration, data or thread count differs "
                                            "from another member's (run hash %s...): a group must run one config",
                                            g.rank, run_hash.substr(0, 12).c_str()));
  std::uint64_t agreed = 0;
  for (int k = 0; k < 3; ++k) agreed |= static_cast<std::uint64_t>(v[k]) << (16 * k);
  return agreed;
}

}  // namespace

result<run_summary> run_training(const run_config& given, const run_options& o) {
  run_config c = given;  // batch and grad_accum may change on out-of-memory
  if (c.out_dir.empty())
    return make_error(errc::invalid_argument, "no output directory: set output.dir or pass --out DIR");
  if (auto st = files::make_dirs(c.out_dir); !st) return st.err();
  const std::string ckpt_root = c.out_dir + "/checkpoints";
  const auto& group = o.group;
  const bool lead = group.rank == 0;  // the member that writes out_dir
  if (group.world > 1 && (!group.all_reduce_sum || group.rank >= group.world))
    return make_error(errc::invalid_argument, fmt("trainer group: rank %u of %u without an all-reduce", group.rank,
                                                  group.world));
  if (group.world > static_cast<std::uint32_t>(c.grad_accum))
    return make_error(errc::invalid_argument,
                      fmt("trainer group of %u but train.grad_accum is %d: each member takes whole micro-batches",
                          group.world, c.grad_accum));
  const std::string work_dir = lead ? c.out_dir : c.out_dir + fmt("/rank-%u", group.rank);
  const int threads = c.threads > 0 ? c.threads : std::max(1u, std::thread::hardware_concurrency());
  engine::kernels::set_threads(threads);

  // Data.
  std::string data_dir = c.shards;
  if (!c.dataset.empty()) {
    if (o.dataset_root.empty())
      return make_error(errc::invalid_argument, "data.dataset " + c.dataset + ": no dataset root (run it in the trainer service, "
                                                "or use data.shards with the dataset's directory)");
    data_dir = o.dataset_root + "/" + c.dataset;
  }
  const bool sft = c.format == "sft";
  if (!c.dataset.empty() && c.text.empty() && c.sft.empty()) {
    if (sft) {  // records from the dataset: its chat records, or pairs of its paragraphs
      auto prepared = prepare_sft_from_dataset(data_dir, work_dir + "/data", c.tokenizer);
      if (!prepared) return prepared.err();
      data_dir = *prepared;
    } else if (!c.tokenizer.empty()) {
      return make_error(errc::invalid_argument,
                        "data.dataset " + c.dataset + " holds GPT-2 tokens (as ingest writes them); data.tokenizer " +
                            c.tokenizer + " applies to data.text and data.sft only");
    }
  } else if (!c.text.empty() || !c.sft.empty()) {
    auto prepared = sft ? prepare_sft_dataset(c.text.empty() ? c.sft : c.text, !c.text.empty(), work_dir + "/data",
                                              c.tokenizer)
                        : prepare_text_dataset(c.text, work_dir + "/data", c.tokenizer);
    if (!prepared) return prepared.err();
    data_dir = *prepared;
  }
  auto ds = shards::dataset::open(data_dir, shards::verify::eager);
  if (!ds) return ds.err();
  auto data_id = data_identity(data_dir);
  if (!data_id) return data_id.err();
  const std::string run_hash = crypto::sha256_hex(c.math_hash() + "|" + *data_id + "|threads=" + std::to_string(threads));

  auto key = checkpoint_key(o.data_dir);
  if (!key) return key.err();

  // Model and optimiser: resumed, initialised from another run, or random.
  // Out of memory: halve the micro-batch and double accumulation — the same
  // tokens per optimiser step, in smaller pieces — until it fits or batch is 1.
  auto create = [&]() -> result<engine::gpt2> {
    if (o.fail_alloc && o.fail_alloc(c.batch))
      return make_error(errc::resource_exhausted, "injected allocation failure");
    return engine::gpt2::create(c.model, c.batch, c.seq_len);
  };
  auto made = create();
  // A group must agree on the micro-batch (the members split one data stream):
  // out of memory there is an error naming what to change.
  if (!made && made.code() == errc::resource_exhausted && group.world > 1)
    return make_error(errc::resource_exhausted,
                      fmt("out of memory at micro-batch %d in a group of %u trainers (%s): set train.batch lower "
                          "and train.grad_accum higher for the whole group",
                          c.batch, group.world, made.err().message.c_str()));
  while (!made && made.code() == errc::resource_exhausted && c.batch > 1) {
    say(o, fmt("out of memory at micro-batch %d (%s): micro-batch %d, accumulation %d", c.batch,
               made.err().message.c_str(), c.batch / 2, c.grad_accum * 2));
    c.grad_accum *= 2;
    c.batch /= 2;
    made = create();
  }
  if (!made) return made.err();
  engine::gpt2 model = std::move(*made);
  engine::adamw opt(model.params().size(), c.adam, model.layout().ranges());
  run_summary sum;
  shards::cursor start_cursor;
  std::uint64_t tokens_seen = 0;

  std::optional<opened_snapshot> resumed;
  if (!lead) {
    // Opened below, once rank 0 has said which.
  } else if (o.resume) {
    auto snap = open_snapshot(ckpt_root, *key);
    if (snap) {
      resumed = std::move(*snap);
    } else if (snap.code() != errc::not_found) {
      return snap.err();
    } else {
      say(o, "no snapshot under " + ckpt_root + ": starting from step 0");
    }
  } else if (has_snapshots(ckpt_root)) {
    return make_error(errc::already_exists, ckpt_root + " already holds snapshots: pass --resume to continue "
                                                        "that run, or choose another output directory");
  }
  if (group.world > 1) {
    auto agreed = agree_start(group, resumed ? resumed->state.step : 0, run_hash);
    if (!agreed) return agreed.err();
    if (!lead && *agreed > 0) {
      auto snap = open_snapshot(ckpt_root + "/" + ckpt::step_dir_name(*agreed), *key);
      if (!snap) return snap.err();
      resumed = std::move(*snap);
    }
  }
  if (resumed) {
    for (const auto& w : resumed->where.warnings) say(o, "warning: " + w);
    if (resumed->state.config_hash != run_hash)
      return make_error(errc::conflict, resumed->where.dir + " was made by a different configuration, data or "
                                                              "thread count (hash " +
                                            resumed->state.config_hash.substr(0, 12) + ", this run " +
                                            run_hash.substr(0, 12) + "): resuming would not continue that run");
    if (auto st = load_params(*resumed, model); !st) return st.err();
    if (auto st = load_optimizer(*resumed, opt); !st) return st.err();
    if (lead)
      if (auto st = set_aside_newer(ckpt_root, resumed->state.step, o); !st) return st.err();
    sum.first_step = resumed->state.step;
    start_cursor = resumed->state.cursor;
    tokens_seen = resumed->state.tokens_seen;
    sum.last_loss = resumed->state.last_loss;
    sum.snapshot = resumed->where.dir;
    say(o, fmt("resumed from %s (step %llu, loss %.4f)", resumed->where.dir.c_str(),
               static_cast<unsigned long long>(sum.first_step), double(resumed->state.last_loss)));
  } else if (!c.init_from.empty()) {
    auto from = open_snapshot(c.init_from, *key);
    if (!from) return from.err();
    for (const auto& w : from->where.warnings) say(o, "warning: " + w);
    if (auto st = load_params(*from, model); !st) return st.err();
    say(o, "initialised from " + from->where.dir);
  } else {
    model.init_random(c.seed);
  }

  shards::loader_options lo;
  lo.batch = static_cast<std::size_t>(c.batch);
  lo.seq_len = static_cast<std::size_t>(c.seq_len);
  lo.seed = c.seed;
  lo.shuffle = c.shuffle;
  auto ld = shards::loader::create(*ds, lo, start_cursor);
  if (!ld) return ld.err();

  metrics_log metrics;  // rank 0 writes it; the others read its history (the spike check must agree)
  const std::string metrics_path = c.out_dir + "/metrics.jsonl";
  auto history = lead ? metrics.open(metrics_path, sum.first_step) : metrics_log::read_losses(metrics_path, sum.first_step);
  if (!history) return history.err();
  std::vector<float> recent = std::move(*history);  // losses so far, for the spike check
  std::vector<shards::cursor> skipped = resumed ? resumed->state.skipped : std::vector<shards::cursor>{};
  int rollbacks = 0;

  // Every buffer of the loop, allocated once.
  // This member's micro-batches of a step: k = rank, rank + world, ... < grad_accum.
  const std::size_t bt = std::size_t(c.batch) * std::size_t(c.seq_len);
  const std::uint32_t world = std::max<std::uint32_t>(1, group.world);
  const int own = static_cast<int>((static_cast<std::uint32_t>(c.grad_accum) - group.rank + world - 1) / world);
  std::vector<std::uint32_t> in_u(bt), tg_u(bt);
  std::vector<std::vector<std::int32_t>> inputs(own, std::vector<std::int32_t>(bt)),
      targets(own, std::vector<std::int32_t>(bt));
  std::vector<std::vector<float>> weights(sft ? own : 0, std::vector<float>(bt));
  std::vector<engine::micro_batch> micro(own);
  for (int k = 0; k < own; ++k) micro[k] = {inputs[k], targets[k], sft ? std::span<const float>(weights[k]) : std::span<const float>()};
  engine::data_parallel dp{c.grad_accum, group.all_reduce_sum};
  const engine::data_parallel* dp_ptr = group.world > 1 ? &dp : nullptr;
  // Tokens with sft_masked_bit are context, not targets (sft_data.hpp). A window
  // that holds no target at all (inside a long prompt) trains on every token.
  auto unpack = [&](int k) {
    float sum = 0;
    for (std::size_t i = 0; i < bt; ++i) {
      inputs[k][i] = static_cast<std::int32_t>(in_u[i] & ~sft_masked_bit);
      targets[k][i] = static_cast<std::int32_t>(tg_u[i] & ~sft_masked_bit);
      if (sft) sum += weights[k][i] = (tg_u[i] & sft_masked_bit) ? 0.0f : 1.0f;
    }
    if (sft && sum == 0) std::fill(weights[k].begin(), weights[k].end(), 1.0f);
  };

  const engine::lr_schedule schedule = c.schedule();
  const std::uint64_t total = static_cast<std::uint64_t>(c.steps);
  const std::uint64_t log_every = std::max<std::uint64_t>(1, total / 20);
  say(o, fmt("training L%d H%d C%d (%zu parameters) on %llu tokens: B=%d T=%d accum=%d, steps %llu..%llu, "
             "%d threads",
             c.model.layers, c.model.heads, c.model.channels, model.params().size(),
             static_cast<unsigned long long>(ds->token_count()), c.batch, c.seq_len, c.grad_accum,
             static_cast<unsigned long long>(sum.first_step + 1), static_cast<unsigned long long>(total), threads));

  auto snapshot = [&](std::uint64_t step) -> status {
    train_state st;
    st.step = step;
    st.config_hash = run_hash;
    st.schedule = schedule;
    st.seed = c.seed;
    st.cursor = ld->position();
    st.threads = threads;
    st.tokens_seen = tokens_seen;
    st.last_loss = sum.last_loss;
    st.skipped = skipped;
    auto dir = save_snapshot(ckpt_root, model, opt, st, *key, c.keep);
    if (!dir) return dir.err();
    sum.snapshot = *dir;
    if (o.on_snapshot) o.on_snapshot(*dir);
    return ok_status();
  };

  auto last_snapshot_time = clock_type::now();
  std::uint64_t step = sum.first_step;
  // Rolls back to the last snapshot after an anomalous step and marks its batch
  // to be skipped; the metrics log and the spike window go back with it.
  auto roll_back = [&](shards::cursor bad_batch, const std::string& why) -> status {
    if (lead && sum.snapshot.empty())
      return make_error(errc::internal, why + "; no snapshot to roll back to");
    if (rollbacks >= c.max_rollbacks)
      return make_error(errc::internal, why + fmt("; %d rollbacks already (anomaly.max_rollbacks)", rollbacks));
    // The others go back to rank 0's latest: published before this step's all-reduce.
    auto back = open_snapshot(lead ? sum.snapshot : ckpt_root, *key);
    if (!back && !lead && back.code() == errc::not_found)
      return make_error(errc::internal, why + "; no snapshot to roll back to");
    if (!back) return back.err();
    if (auto st = load_params(*back, model); !st) return st;
    if (auto st = load_optimizer(*back, opt); !st) return st;
    ++rollbacks;
    const std::uint64_t bad_step = step + 1;
    skipped = back->state.skipped;
    skipped.push_back(bad_batch);
    step = back->state.step;
    tokens_seen = back->state.tokens_seen;
    sum.last_loss = back->state.last_loss;
    auto again = shards::loader::create(*ds, lo, back->state.cursor);
    if (!again) return again.err();
    *ld = std::move(*again);
    auto kept = lead ? metrics.open(metrics_path, step) : metrics_log::read_losses(metrics_path, step);
    if (!kept) return kept.err();
    recent = std::move(*kept);
    say(o, why + fmt("; rolled back to step %llu, skipping that batch (epoch %llu, window %llu)",
                     static_cast<unsigned long long>(step), static_cast<unsigned long long>(bad_batch.epoch),
                     static_cast<unsigned long long>(bad_batch.position)));
    if (o.on_rollback) o.on_rollback(bad_step, step, why);
    return ok_status();
  };

  while (step < total) {
    const auto t0 = clock_type::now();
    const shards::cursor at = ld->position();
    const bool skip = std::find(skipped.begin(), skipped.end(), at) != skipped.end();
    for (int k = 0; k < c.grad_accum; ++k) {
      if (auto st = ld->next(in_u, tg_u); !st) return st.err();
      if (static_cast<std::uint32_t>(k) % world == group.rank) unpack(k / static_cast<int>(world));
    }
    if (skip) continue;  // a batch an earlier rollback marked; the step count does not move
    auto s = engine::train_step(model, opt, schedule, c.grad_clip, static_cast<int>(step), micro, dp_ptr);
    if (!s && dp_ptr && o.stop && o.stop->load()) {
      // Stopped while the group exchanged this step: the parameters are still
      // the last step's, so rank 0 snapshots them — with the data cursor put
      // back before this step's batches — and the run ends stopped.
      if (lead && step > sum.first_step && sum.snapshot.find(ckpt::step_dir_name(step)) == std::string::npos) {
        auto back = shards::loader::create(*ds, lo, at);
        if (!back) return back.err();
        *ld = std::move(*back);
        if (auto st = snapshot(step); !st) return st.err();
      }
      sum.stopped = true;
      say(o, fmt("stopped at step %llu (in the group's exchange)", static_cast<unsigned long long>(step)));
      break;
    }
    if (!s) return s.err();
    if (o.fault)
      if (auto f = o.fault(step + 1)) s->loss = *f;
    std::string anomaly;
    if (!std::isfinite(s->loss) || !std::isfinite(s->grad_norm)) {
      anomaly = fmt("step %llu: loss %g, gradient norm %g: not finite", static_cast<unsigned long long>(step + 1),
                    double(s->loss), double(s->grad_norm));
    } else if (c.spike_zscore > 0 && recent.size() >= static_cast<std::size_t>(c.spike_window)) {
      double mean = 0, var = 0;
      const auto first = recent.end() - c.spike_window;
      for (auto it = first; it != recent.end(); ++it) mean += *it;
      mean /= c.spike_window;
      for (auto it = first; it != recent.end(); ++it) var += (*it - mean) * (*it - mean);
      const double sd = std::sqrt(var / (c.spike_window - 1));
      if (s->loss > mean + c.spike_zscore * sd && s->loss > mean * 1.01)
        anomaly = fmt("step %llu: loss %.4f is a spike (mean %.4f, sd %.4f over %d steps, z > %.1f)",
                      static_cast<unsigned long long>(step + 1), double(s->loss), mean, sd, c.spike_window,
                      c.spike_zscore);
    }
    if (!anomaly.empty()) {
      if (auto st = roll_back(at, anomaly); !st) return st.err();
      continue;
    }
    recent.push_back(s->loss);
    ++step;
    const double ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
    tokens_seen += bt * std::size_t(c.grad_accum);
    sum.last_loss = s->loss;
    step_record rec{step, s->loss, s->lr, s->grad_norm, double(bt * c.grad_accum) / (ms / 1000.0), ms};
    if (lead)
      if (auto st = metrics.append(rec); !st) return st.err();
    if (o.on_step) o.on_step(rec);
    if (step % log_every == 0 || step == sum.first_step + 1 || step == total)
      say(o, fmt("step %6llu/%llu  loss %.4f  lr %.2e  norm %.3f  %.0f tok/s  %.1f ms",
                 static_cast<unsigned long long>(step), static_cast<unsigned long long>(total), double(s->loss),
                 double(s->lr), double(s->grad_norm), rec.tokens_per_s, ms));

    const bool stopping = o.stop && o.stop->load();
    const bool by_steps = c.every_steps > 0 && step % static_cast<std::uint64_t>(c.every_steps) == 0;
    const bool by_time = c.every_minutes > 0 &&
                         clock_type::now() - last_snapshot_time >= std::chrono::duration<double>(c.every_minutes * 60);
    if (lead && (by_steps || by_time || step == total || stopping)) {
      if (auto st = snapshot(step); !st) return st.err();
      last_snapshot_time = clock_type::now();
    }
    if (stopping && step < total) {
      sum.stopped = true;
      say(o, fmt("stopped at step %llu; snapshot %s", static_cast<unsigned long long>(step), sum.snapshot.c_str()));
      break;
    }
  }
  sum.steps = step;
  const auto* bytes = reinterpret_cast<const char*>(model.params().data());
  sum.params_sha256 = crypto::sha256_hex(std::string_view(bytes, model.params().size() * sizeof(float)));
  return sum;
}

}  // namespace loom::trainer
