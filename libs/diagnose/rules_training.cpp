// Rules on the training itself: divergence, plateau, memory, checkpoints,
// contention, and an hpo search whose every trial failed. Each reads the
// job's failure and events first (what the trainer and scheduler said), then
// the stage's metrics log (what the curve shows).
#include "libs/diagnose/rule_set.hpp"
#include "libs/diagnose/signals.hpp"

#include <algorithm>
#include <cmath>

namespace loom::diagnose {
namespace {

const std::vector<std::string_view> diverge_words = {" diverged: ", ": not finite", "non-finite", "loss is nan",
                                                     "loss nan", "loss inf"};

bool hpo_stage(const evidence& e, const std::string& stage) {
  const auto* s = find_stage(e, stage);
  return s && s->hpo;
}

std::optional<finding> diverged(const evidence& e) {
  auto fail = failure_mentioning(e, diverge_words);
  if (fail && hpo_stage(e, fail->stage)) fail.reset();  // the hpo rule's
  std::vector<const event_fact*> rollbacks;
  for (const auto* ev : events_mentioning(e, {"rollback"}, diverge_words))
    if (!hpo_stage(e, ev->stage)) rollbacks.push_back(ev);
  const stage_fact* curve = nullptr;
  double start = 0, last = 0;
  for (const auto& s : e.stages) {
    if (s.hpo || s.steps.size() < 3) continue;
    const double a = mean_loss(s.steps, 0, std::min<std::size_t>(5, s.steps.size())), b = s.steps.back().loss;
    if (!std::isfinite(b) || (b > 2 * a && b - a > 1)) {
      curve = &s, start = a, last = b;
      break;
    }
  }
  if (!fail && rollbacks.empty() && !curve) return std::nullopt;
  finding f;
  f.confidence = fail ? 0.97 : !rollbacks.empty() ? (e.state == "succeeded" ? 0.6 : 0.85) : 0.7;
  f.stage = fail ? fail->stage : !rollbacks.empty() ? rollbacks.front()->stage : curve->name;
  if (fail) f.evidence.push_back("failed: " + first_line(fail->text));
  if (!rollbacks.empty())
    f.evidence.push_back(fmt("%zu rollback(s) for a diverged or non-finite loss; the first: ", rollbacks.size()) +
                         first_line(rollbacks.front()->text));
  if (curve)
    f.evidence.push_back(fmt("%s: loss %.4f at step %llu, %.4f at its start (mean of its first logged steps)",
                             curve->name.c_str(), last, static_cast<unsigned long long>(curve->steps.back().step),
                             start));
  if (e.state == "succeeded") f.evidence.push_back("the job recovered (its rollbacks helped) and succeeded");
  const auto* s = find_stage(e, f.stage);
  const double lr = s ? stage_lr(*s) : 0;
  f.repair.push_back("lower the learning rate ten-fold: " +
                     resubmit(e, {"optim.lr=" + (lr > 0 ? num(lr / 10) : std::string("<a tenth of it>"))}));
  f.repair.push_back("keep the gradient clipped: --set optim.grad_clip=1.0 (0 turns clipping off)");
  const int warm = s && s->config.known ? s->config.warmup_steps : 0;
  f.repair.push_back(fmt("warm up for longer: --set optim.warmup_steps=%d", std::max(2 * warm, 50)));
  f.repair.push_back("see each rollback and its step: loom job logs " + e.job);
  return f;
}

// Under 1% (and 0.05 nats) lower after 20 logged steps: the run learns nothing.
std::optional<finding> plateau(const evidence& e) {
  constexpr std::size_t min_steps = 20, window = 5;
  for (const auto& s : e.stages) {
    if (s.hpo || s.steps.size() < min_steps) continue;
    if (s.config.known && (s.config.kind == "rm" || s.config.kind == "dpo" || s.config.kind == "rl")) continue;
    const double a = mean_loss(s.steps, 0, window), b = mean_loss(s.steps, s.steps.size() - window, window);
    if (!std::isfinite(a) || !std::isfinite(b) || a <= 0) continue;
    if ((a - b) / a >= 0.01 || a - b >= 0.05) continue;
    if (b > 2 * a && b - a > 1) continue;  // the divergence rule's
    finding f;
    f.stage = s.name;
    f.confidence = s.state == "running" ? 0.75 : 0.8;
    f.evidence.push_back(fmt("%s: loss %.4f over its first %zu logged steps, %.4f over its last %zu (%zu logged, to step "
                             "%llu): %.2f%% lower",
                             s.name.c_str(), a, window, b, window, s.steps.size(),
                             static_cast<unsigned long long>(s.steps.back().step), 100 * (a - b) / a));
    const double lr = stage_lr(s);
    if (lr > 0) f.evidence.push_back("learning rate at most " + num(lr));
    // Below 1e-4 a small GPT barely moves; the templates train at 6e-4 to 3e-3.
    const double up = lr <= 0 ? 6e-4 : lr < 1e-4 ? 6e-4 : std::min(lr * 3, 1e-2);
    f.repair.push_back("raise the learning rate: " + resubmit(e, {"optim.lr=" + num(up)}));
    if (s.config.known && s.config.steps > 0 && s.config.warmup_steps * 2 >= s.config.steps)
      f.repair.push_back(fmt("shorten the warm-up (optim.warmup_steps %d of train.steps %d): --set "
                             "optim.warmup_steps=%d",
                             s.config.warmup_steps, s.config.steps, std::max(1, s.config.steps / 10)));
    f.repair.push_back("check the data is neither tiny nor repeated: loom data status DATASET; loom data rejects DATASET");
    return f;
  }
  return std::nullopt;
}

std::optional<finding> out_of_memory(const evidence& e) {
  auto fail = failure_mentioning(e, {"out of memory", "bad_alloc", "cannot allocate memory", "memory limit",
                                     "oom-kill", "oom kill", "killed by signal 9"});
  auto exhausted = events_mentioning(e, {"load_shed"}, {"nothing left to lower", " kept ("});
  auto paused = events_mentioning(e, {"paused"}, {});
  auto shed = events_mentioning(e, {"load_shed"}, {});
  if (!fail && exhausted.empty() && paused.empty()) return std::nullopt;
  finding f;
  f.confidence = fail ? 0.95 : !exhausted.empty() ? 0.9 : 0.7;
  f.stage = fail ? fail->stage : !exhausted.empty() ? exhausted.front()->stage : paused.front()->stage;
  if (fail) f.evidence.push_back("failed: " + first_line(fail->text));
  if (!exhausted.empty()) f.evidence.push_back("back-off exhausted: " + first_line(exhausted.front()->text));
  if (shed.size() > exhausted.size())
    f.evidence.push_back(fmt("%zu load-shedding step(s) before that", shed.size() - exhausted.size()));
  if (!paused.empty()) f.evidence.push_back(fmt("paused %zu time(s) under pressure: ", paused.size()) +
                                            first_line(paused.front()->text));
  const auto* s = find_stage(e, f.stage);
  if (s && s->memory_bytes) f.evidence.push_back(fmt("estimated %.0f MiB per trainer", double(s->memory_bytes) / (1 << 20)));
  const int b = s && s->config.known ? s->config.batch : 0, a = s && s->config.known ? std::max(1, s->config.grad_accum) : 1;
  if (b > 1)
    f.repair.push_back("halve the micro-batch, same tokens per step: " +
                       resubmit(e, {fmt("train.batch=%d", b / 2), fmt("train.grad_accum=%d", 2 * a)}));
  else
    f.repair.push_back("shorter windows: " + resubmit(e, {"train.seq_len=" + std::to_string(
                                                              s && s->config.seq_len > 1 ? s->config.seq_len / 2 : 64)}));
  f.repair.push_back("a smaller model: loom templates (each template's parameters and memory estimate)");
  f.repair.push_back("run it where there is more memory: loom status (each trainer's memory), then submit with --zone Z");
  return f;
}

std::optional<finding> corrupt_checkpoint(const evidence& e) {
  auto fail = failure_mentioning(e, {"verifies:", "refused snapshot", "corrupt", "checksum", "sha256 mismatch"});
  auto fallbacks = events_mentioning(e, {"snapshot_fallback"}, {});
  std::size_t audited = 0;
  for (const auto& a : e.audit) audited += a.action == "checkpoint.fallback";
  if (!fail && fallbacks.empty() && audited == 0) return std::nullopt;
  finding f;
  f.confidence = fail ? 0.96 : 0.85;
  f.stage = fail ? fail->stage : !fallbacks.empty() ? fallbacks.front()->stage : "";
  if (fail) f.evidence.push_back("failed: " + first_line(fail->text));
  if (!fallbacks.empty())
    f.evidence.push_back(fmt("%zu snapshot fallback(s); the first: ", fallbacks.size()) + first_line(fallbacks.front()->text));
  if (audited) f.evidence.push_back(fmt("%zu checkpoint.fallback record(s) in the audit trail", audited));
  if (!fail) f.evidence.push_back("the stage went on from an older snapshot that verifies");
  f.repair.push_back("see which snapshot files failed their hash and why: loom job logs " + e.job);
  f.repair.push_back("check the disk under the job's directory: dmesg | grep -i 'i/o error'; df -h; smartctl -H DEVICE");
  const auto* s = find_stage(e, f.stage);
  const int keep = s && s->config.known ? s->config.keep : 0;
  f.repair.push_back(fmt("keep more snapshots to fall back to: --set checkpoint.keep=%d", std::max(keep + 2, 3)));
  if (fail) f.repair.push_back("start the stage afresh: move its checkpoints/ aside, then " + resubmit(e, {}));
  return f;
}

// Slower steps than the stage itself ran, or more threads than the node has
// cores (the scheduler refuses that at submit; a node may re-register smaller).
// Medians of 10 steps over 40 or more: one slow step, or a short run's noise, is no slowdown.
std::optional<finding> contention(const evidence& e) {
  constexpr std::size_t window = 10, min_steps = 40;
  for (const auto& s : e.stages) {
    if (s.hpo) continue;
    std::uint32_t cores = 0;
    for (const auto& n : e.nodes)
      if (n.id == s.node) cores = n.cpu_cores;
    const bool over = s.config.known && cores > 0 && s.config.threads > static_cast<int>(cores);
    // The best and the slowest 10-step median (the first step, which warms up, left out).
    double best = 0, slowest = 0;
    std::size_t slow_at = 0;
    if (s.steps.size() >= min_steps)
      for (std::size_t i = 1; i + window <= s.steps.size(); ++i) {
        const double m = median_speed(s.steps, i, window);
        best = std::max(best, m);
        if (slowest == 0 || m < slowest) slowest = m, slow_at = i;
      }
    const bool slowed = best > 0 && slowest < 0.5 * best;
    const bool now = slowed && slow_at + window == s.steps.size();
    if (!over && !slowed) continue;
    finding f;
    f.stage = s.name;
    f.confidence = over && slowed ? 0.9 : over ? 0.85 : now ? 0.8 : 0.75;
    if (over)
      f.evidence.push_back(fmt("train.threads %d on %s, which has %u cores: threads wait for each other",
                               s.config.threads, s.node.c_str(), cores));
    if (slowed)
      f.evidence.push_back(fmt("steps %llu-%llu%s at %.0f tokens/s, %.0f at its best (medians of %zu steps): %.1fx slower",
                               static_cast<unsigned long long>(s.steps[slow_at].step),
                               static_cast<unsigned long long>(s.steps[slow_at + window - 1].step),
                               now ? " (its latest)" : "", slowest, best, window, best / std::max(slowest, 1e-9)));
    if (over) f.repair.push_back("one thread per core: " + resubmit(e, {fmt("train.threads=%u", cores)}));
    f.repair.push_back("see what else runs on " + (s.node.empty() ? std::string("the node") : s.node) +
                       ": loom status; top -H on its host");
    f.repair.push_back("keep new work off a shared host: loom node drain " + (s.node.empty() ? "NODE" : s.node) +
                       " --reason 'contention'");
    return f;
  }
  return std::nullopt;
}

std::optional<finding> hpo_all_diverged(const evidence& e) {
  for (const auto& s : e.stages) {
    if (!s.hpo) continue;
    auto trials = events_mentioning(e, {"hpo_trial"}, {});
    std::erase_if(trials, [&](const event_fact* ev) { return ev->stage != s.name; });
    std::size_t bad = 0, scored = 0;
    for (const auto* t : trials) {
      if (mentions(t->text, {"failed (", "not finite", "diverged", "validation loss nan", "validation loss inf"})) ++bad;
      else ++scored;
    }
    const bool none = static_cast<bool>(failure_mentioning(e, {"no trial reached a finite validation loss"}));
    if (!none && (trials.size() < 2 || scored > 0)) continue;
    finding f;
    f.stage = s.name;
    f.confidence = none ? 0.98 : 0.9;
    f.evidence.push_back(fmt("%zu trial segment(s) of %s, every one failed or diverged", trials.size(), s.name.c_str()));
    if (!trials.empty()) f.evidence.push_back("e.g. " + first_line(trials.front()->text));
    f.repair.push_back("search lower learning rates: in the template's [hpo.space], e.g. \"optim.lr\" = "
                       "{log_uniform = [1e-4, 3e-3]}; submit it with --templates DIR");
    f.repair.push_back("keep every trial's gradient clipped: --set optim.grad_clip=1.0");
    f.repair.push_back("see each trial's failure: loom job logs " + e.job);
    return f;
  }
  return std::nullopt;
}

}  // namespace

std::vector<rule> training_rules() {
  return {
      {"diverged", "Training diverged: the loss went far above its start, or was not finite",
       "the job's failure and rollback events; each stage's loss curve",
       {"a rollback or failure naming a diverged (above anomaly.diverge_ratio x the start) or non-finite loss",
        "a logged loss above twice the stage's start (and 1 more)"},
       {"lower the learning rate ten-fold (--set optim.lr=...)", "keep gradient clipping on (optim.grad_clip)",
        "warm up for longer (optim.warmup_steps)", "read the rollbacks: loom job logs JOB"},
       diverged},
      {"plateau", "Loss plateau: the stage learns nothing",
       "each stage's loss curve (metrics.jsonl) and learning rate",
       {"20 or more logged steps whose last 5 average under 1% (and 0.05) below the first 5"},
       {"raise the learning rate (--set optim.lr=...)", "shorten a warm-up that takes most of the run",
        "check the dataset: loom data status / loom data rejects"},
       plateau},
      {"out_of_memory", "Out of memory: the back-off ran out of room",
       "the job's failure, load-shedding and pause events, the stage's memory estimate",
       {"a failure naming out of memory, bad_alloc, a memory limit or the OOM killer",
        "a load_shed event that could lower the micro-batch no further", "a stage paused under memory pressure"},
       {"halve train.batch and double train.grad_accum (same tokens per step)", "shorter train.seq_len",
        "a smaller template", "a node with more memory (loom status, --zone)"},
       out_of_memory},
      {"corrupt_checkpoint", "Corrupt checkpoint: a snapshot failed its hashes",
       "snapshot fallback events, the failure, checkpoint.fallback audit records",
       {"a failure saying no snapshot verifies (hash or size mismatch, refused)",
        "a snapshot_fallback event: the stage went on from an older snapshot"},
       {"read which file failed: loom job logs JOB", "check the disk (dmesg, smartctl)",
        "keep more snapshots (checkpoint.keep)", "restart the stage with its checkpoints/ moved aside"},
       corrupt_checkpoint},
      {"contention", "Slow steps from contention: the stage's steps slowed or its threads outnumber the cores",
       "each stage's tokens/s curve, train.threads, the node's cores in the roster",
       {"over 40 or more logged steps, some 10 steps' median tokens/s under half the stage's best 10-step median",
        "train.threads above the cores the node registered"},
       {"one thread per core (--set train.threads=N)", "find what else runs there (loom status, top -H)",
        "drain a shared node (loom node drain)"},
       contention},
      {"hpo_all_diverged", "Every trial of the hpo search failed or diverged",
       "the hpo stage's hpo_trial events and its failure",
       {"the search ended with no trial at a finite validation loss", "every trial segment so far failed"},
       {"search lower learning rates in [hpo.space]", "keep gradient clipping on", "read each trial: loom job logs JOB"},
       hpo_all_diverged},
  };
}

}  // namespace loom::diagnose
