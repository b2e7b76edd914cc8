#include "libs/diagnose/suggest.hpp"

#include "libs/diagnose/signals.hpp"

#include <algorithm>
#include <cmath>

namespace loom::diagnose {
namespace {

const node_fact* node_of(const evidence& e, const std::string& id) {
  for (const auto& n : e.nodes)
    if (n.id == id) return &n;
  return nullptr;
}

// Trainer processes registered from the same host as `id` ("trainer-2@vm" and "trainer@vm" share vm's cores).
int trainers_on_host(const evidence& e, const std::string& id) {
  const auto host = id.substr(id.find('@') == std::string::npos ? id.size() : id.find('@'));
  int n = 0;
  for (const auto& x : e.nodes)
    if (x.service == "trainer" && x.id.size() >= host.size() && x.id.ends_with(host)) ++n;
  return std::max(n, 1);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double speed(const stage_fact& s) {
  std::vector<double> v;
  for (std::size_t i = 1; i < s.steps.size(); ++i) v.push_back(s.steps[i].tokens_per_s);  // the first warms up
  return median_of(v);
}

suggestion make(const evidence& e, const stage_fact& s, std::string id, std::string title, std::vector<std::string> sets,
                std::string metric, double gain) {
  suggestion x;
  x.id = std::move(id);
  x.title = std::move(title);
  x.stage = s.name;
  x.sets = std::move(sets);
  x.command = resubmit(e, x.sets);
  x.metric = std::move(metric);
  x.gain = gain;
  return x;
}

void for_stage(const evidence& e, const stage_fact& s, const cpu_facts& cpu, std::vector<suggestion>& out) {
  const auto& c = s.config;
  const node_fact* n = node_of(e, s.node);
  const double tps = speed(s);
  const std::string measured = tps > 0 ? fmt("%.0f tokens/s (median over %zu steps)", tps, s.steps.size()) : "";

  // Threads against the cores its host gives each trainer process.
  if (n && c.threads > 0 && s.members.size() <= 1) {
    const int per = std::max(1, static_cast<int>(n->cpu_cores) / trainers_on_host(e, s.node));
    if (per > c.threads) {
      auto x = make(e, s, "threads", "use the cores the trainer has", {fmt("train.threads=%d", per)}, "tokens_per_s",
                    0.6 * double(per - c.threads) / c.threads);
      x.evidence.push_back(fmt("train.threads %d on %s, which has %u cores for %d trainer process(es): %d idle",
                               c.threads, s.node.c_str(), n->cpu_cores, trainers_on_host(e, s.node), per - c.threads));
      if (!measured.empty()) x.evidence.push_back(measured);
      out.push_back(std::move(x));
    }
  }
  // Micro-batch against memory headroom: the same tokens per step in fewer, larger pieces.
  if (n && n->memory_bytes && s.memory_bytes && c.grad_accum > 1 && c.batch > 0) {
    int k = 1;
    while (k * 2 <= c.grad_accum && c.grad_accum % (k * 2) == 0 &&
           double(s.memory_bytes) * (k * 2) <= 0.5 * double(n->memory_bytes) / trainers_on_host(e, s.node))
      k *= 2;
    if (k > 1) {
      auto x = make(e, s, "micro_batch", "a larger micro-batch in the memory left idle, the same tokens per step",
                    {fmt("train.batch=%d", c.batch * k), fmt("train.grad_accum=%d", c.grad_accum / k)}, "tokens_per_s",
                    0.35 * std::log2(double(k)));
      x.evidence.push_back(fmt("micro-batch %d x accumulation %d; estimated %.0f MiB per trainer of %s's %.1f GiB",
                               c.batch, c.grad_accum, double(s.memory_bytes) / (1 << 20), s.node.c_str(),
                               double(n->memory_bytes) / (1 << 30)));
      if (!measured.empty()) x.evidence.push_back(measured);
      out.push_back(std::move(x));
    }
  }
  // bf16 matmuls where the CPU multiplies them natively.
  if (cpu.known && cpu.bf16 && c.precision == "fp32") {
    auto x = make(e, s, "precision", "bf16 matmuls: this CPU multiplies them natively (AMX / AVX512-BF16)",
                  {"train.precision=auto"}, "tokens_per_s", 2.0);
    x.evidence.push_back("train.precision fp32 on a CPU with bf16 matrix units");
    if (!measured.empty()) x.evidence.push_back(measured);
    out.push_back(std::move(x));
  }
  // The learning rate from the loss curve's shape.
  const double lr = stage_lr(s);
  if (lr > 0 && s.steps.size() >= 20 && c.kind != "rm" && c.kind != "dpo" && c.kind != "rl") {
    std::size_t at_min = 0;
    for (std::size_t i = 1; i < s.steps.size(); ++i)
      if (s.steps[i].loss < s.steps[at_min].loss) at_min = i;
    const std::size_t tail = std::max<std::size_t>(5, s.steps.size() / 10);
    const double last = mean_loss(s.steps, s.steps.size() - tail, tail), best = s.steps[at_min].loss;
    const double first = mean_loss(s.steps, 0, 5);
    const auto rollbacks = events_mentioning(e, {"rollback"}, {});
    if ((std::isfinite(last) && last > 1.05 * best + 0.02 && at_min + tail < s.steps.size()) || !rollbacks.empty()) {
      auto x = make(e, s, "lr_lower", "a lower learning rate: the loss went back up", {"optim.lr=" + num(lr / 3)},
                    "loss", 0.5);
      x.evidence.push_back(fmt("loss %.4f at its lowest (step %llu), %.4f over the last %zu steps; learning rate %s",
                               best, static_cast<unsigned long long>(s.steps[at_min].step), last, tail,
                               num(lr).c_str()));
      if (!rollbacks.empty()) x.evidence.push_back(fmt("%zu rollback(s)", rollbacks.size()));
      out.push_back(std::move(x));
    } else if (s.steps.size() >= 40 && std::isfinite(first) && first > 0 && (first - last) / first < 0.05) {
      auto x = make(e, s, "lr_higher", "a higher learning rate: the loss barely moves",
                    {"optim.lr=" + num(std::min(lr * 3, 1e-2))}, "loss", 0.4);
      x.evidence.push_back(fmt("loss %.4f over the first 5 steps, %.4f over the last %zu: %.1f%% lower; learning rate %s",
                               first, last, tail, 100 * (first - last) / first, num(lr).c_str()));
      out.push_back(std::move(x));
    } else if (std::isfinite(last) && s.state == "succeeded" && s.steps.size() >= 40) {
      // Still falling at its end: the last tenth below the one before by 2% or more.
      const double before = mean_loss(s.steps, s.steps.size() - 2 * tail, tail);
      if (std::isfinite(before) && last < 0.98 * before && c.steps > 0) {
        auto x = make(e, s, "more_steps", "train longer (or a larger template: loom templates): still learning at its end",
                      {fmt("train.steps=%d", 2 * c.steps)}, "loss", 0.2);
        x.evidence.push_back(fmt("loss %.4f over its last %zu steps, %.4f over the %zu before: still falling", last, tail,
                                 before, tail));
        out.push_back(std::move(x));
      }
    }
  }
  // A cross-site stage whose sites wait on the sync: rounds less often, smaller deltas.
  const std::uint64_t end = s.finished_unix_ns ? s.finished_unix_ns : e.now_unix_ns;
  const double ran_s = s.started_unix_ns && end > s.started_unix_ns ? double(end - s.started_unix_ns) / 1e9 : 0;
  for (const auto& x : s.sites) {
    if (ran_s <= 0 || x.stall_s < 0.1 * ran_s || c.inner_steps <= 0) continue;
    std::vector<std::string> sets = {fmt("diloco.inner_steps=%d", 2 * c.inner_steps)};
    if (c.codec != "int4" && c.codec != "topk") sets.push_back(c.codec == "int8" ? "diloco.codec=int4" : "diloco.codec=int8");
    auto sg = make(e, s, "diloco_h", "sync less often and smaller: the sites wait on the rounds", sets, "tokens_per_s",
                   x.stall_s / ran_s);
    sg.evidence.push_back(fmt("%s waited %.1f s of the stage's %.1f s on the sync; H (diloco.inner_steps) %d, codec %s",
                              x.site.c_str(), x.stall_s, ran_s, c.inner_steps, c.codec.c_str()));
    out.push_back(std::move(sg));
    break;
  }
}

}  // namespace

std::vector<suggestion> suggest(const evidence& e, const cpu_facts& cpu) {
  std::vector<suggestion> out;
  for (const auto& s : e.stages)
    if (!s.hpo && s.config.known) for_stage(e, s, cpu, out);
  std::stable_sort(out.begin(), out.end(), [](const suggestion& a, const suggestion& b) { return a.gain > b.gain; });
  return out;
}

}  // namespace loom::diagnose
