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

const dataset_fact* data_of(const evidence& e, const stage_config& c) {
  const std::string& name = !c.dataset.empty() ? c.dataset : c.data_text;
  for (const auto& d : e.datasets)
    if (!name.empty() && d.name == name) return &d;
  return nullptr;
}

// Parameters of the stage's model at `channels` wide: each layer holds 12C^2 + 13C,
// the rest (token and position tables, the final norm) grows linearly with C.
double params_at(const stage_config& c, int channels) {
  const double C = c.channels, L = c.layers;
  const double layers = L * (12 * C * C + 13 * C);
  const double rest = std::max(0.0, double(c.params) - layers) / C;
  const double W = channels;
  return L * (12 * W * W + 13 * W) + rest * W;
}

// The median loss of steps [from, from + n) (the mean of the middle two for
// an even n): how the curve is read, since one batch's loss is noisy
// (byte-level text: ±0.2 step to step, and an easy batch now and then).
// NaN when the range holds a non-finite loss or runs past the log.
double loss_median(const stage_fact& s, std::size_t from, std::size_t n) {
  if (n == 0 || from + n > s.steps.size()) return std::nan("");
  std::vector<double> v;
  for (std::size_t i = from; i < from + n; ++i) {
    if (!std::isfinite(s.steps[i].loss)) return std::nan("");
    v.push_back(s.steps[i].loss);
  }
  std::sort(v.begin(), v.end());
  return (v[(n - 1) / 2] + v[n / 2]) / 2;
}

// A model sized against its data (Hoffmann et al. 2022: about 20 tokens per
// parameter trains a model compute-optimally): far fewer and it memorises —
// a narrower model; far more, and the stage has already seen its fill with
// the loss flat — a wider one.
void model_size(const evidence& e, const stage_fact& s, std::vector<suggestion>& out) {
  const auto& c = s.config;
  const dataset_fact* d = data_of(e, c);
  if (!d || d->tokens == 0 || c.params == 0 || c.channels <= 0 || c.heads <= 0 || c.layers <= 0) return;
  if (c.kind != "lm" && c.kind != "diloco") return;  // fine-tuning data is small by design
  const double D = double(d->tokens), N = double(c.params), per = D / N;
  const std::string data = fmt("%s holds %s%.0f tokens for %.2fM parameters: %.2f tokens per parameter",
                               d->name.c_str(), d->tokens_estimated ? "about " : "", D, N / 1e6, per);
  if (per < 2) {
    int w = c.channels;
    for (int k = 0; k < 3; ++k) {
      const int half = w / 2;
      if (half < 32 || half % c.heads != 0 || half / c.heads < 8) break;
      w = half;
      if (D / params_at(c, w) >= 20) break;
    }
    if (w == c.channels) return;
    auto x = make(e, s, "model_smaller", "a narrower model, or more data: this model can memorise what it is given",
                  {fmt("model.channels=%d", w)}, "tokens_per_s", 0.3);
    x.evidence.push_back(data);
    x.evidence.push_back(fmt("%d channels: %.2fM parameters, %.2f tokens each (about 20 trains a model "
                             "compute-optimally); or import more data: loom data import",
                             w, params_at(c, w) / 1e6, D / params_at(c, w)));
    out.push_back(std::move(x));
    return;
  }
  const double seen = double(c.steps) * c.batch * std::max(1, c.grad_accum) * c.seq_len;
  const std::size_t n = s.steps.size(), tail = std::max<std::size_t>(5, n / 10);
  if (per >= 80 && seen >= 20 * N && s.state == "succeeded" && n >= 2 * tail) {
    const double last = loss_median(s, n - tail, tail), before = loss_median(s, n - 2 * tail, tail);
    if (!(std::isfinite(last) && std::isfinite(before) && last >= 0.98 * before)) return;  // still falling: more_steps
    auto x = make(e, s, "model_larger", "a wider model: the data can feed one and this one has stopped learning",
                  {fmt("model.channels=%d", 2 * c.channels)}, "loss", 0.3);
    x.evidence.push_back(data);
    x.evidence.push_back(fmt("it trained on %.0f tokens (%.0f per parameter) and its loss is flat: %.4f then %.4f "
                             "over the last two tenths; %d channels hold %.2fM parameters, %.0f tokens each",
                             seen, seen / N, before, last, 2 * c.channels, params_at(c, 2 * c.channels) / 1e6,
                             D / params_at(c, 2 * c.channels)));
    out.push_back(std::move(x));
  }
}

// What to do about documents an import rejected, by the rule that rejected most.
std::string reject_advice(const std::string& rule, const std::string& reimport) {
  if (rule == "licence_denied")
    return "the import's --deny list refused their licences: re-import with a narrower --deny if this use allows "
           "them (" + reimport + " --deny IDS)";
  if (rule.starts_with("gopher_") || rule == "min_chars" || rule.starts_with("c4_"))
    return "the cleaning profile's quality rules dropped them: code or short records keep with --profile code or "
           "--profile minimal (" + reimport + " --profile minimal)";
  if (rule == "empty" || rule.starts_with("empty_") || rule == "binary_content" || rule.starts_with("utf8"))
    return "the files hold no text the readers take (empty, binary or not UTF-8): convert or leave them out, then " +
           reimport;
  if (rule == "json_wrong_type" || rule == "json_missing_field")
    return "JSONL records without a string in the field read: name it with --field F (" + reimport + " --field F)";
  return "fix the documents `loom data rejects` lists, then " + reimport;
}

void data_rejects(const evidence& e, std::vector<suggestion>& out) {
  for (const auto& d : e.datasets) {
    const double total = double(d.documents + d.rejects);
    if (d.text_file || d.rejects == 0 || total <= 0 || double(d.rejects) / total < 0.05) continue;
    const stage_fact* used = nullptr;
    for (const auto& s : e.stages)
      if (!used && s.config.dataset == d.name) used = &s;
    if (!used) continue;
    const double share = double(d.rejects) / total;
    const std::string top = d.rejects_by_rule.empty() ? "" : d.rejects_by_rule.front().first;
    const std::string reimport =
        "loom data import " + (d.source.empty() ? std::string("SOURCE") : d.source) + " --dataset " + d.name;
    suggestion x;
    x.id = "data_rejects";
    x.title = fmt("%.0f%% of the documents were rejected at import: %s", 100 * share,
                  top.empty() ? "see why" : ("most by " + top).c_str());
    x.stage = used->name;
    x.command = "loom data rejects " + d.name;
    x.metric = "tokens";
    x.gain = 0.5 * share;
    x.evidence.push_back(fmt("dataset %s: %llu documents kept, %llu rejected", d.name.c_str(),
                             static_cast<unsigned long long>(d.documents), static_cast<unsigned long long>(d.rejects)));
    if (!d.rejects_by_rule.empty()) {
      std::string by;
      for (std::size_t i = 0; i < d.rejects_by_rule.size() && i < 5; ++i)
        by += (i ? ", " : "") + d.rejects_by_rule[i].first + " " + std::to_string(d.rejects_by_rule[i].second);
      x.evidence.push_back(fmt("by rule (of the first %llu): %s", static_cast<unsigned long long>(d.sampled),
                               by.c_str()));
    }
    if (!d.example.empty()) x.evidence.push_back("e.g. " + d.example);
    x.evidence.push_back(reject_advice(top, reimport));
    out.push_back(std::move(x));
  }
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
    // The curve through a moving median of a tenth of the run (loss_median).
    const std::size_t n = s.steps.size(), tail = std::max<std::size_t>(5, n / 10);
    auto window = [&](std::size_t from) { return loss_median(s, from, tail); };
    std::size_t at_min = tail - 1;
    double best = window(0);
    for (std::size_t i = tail; i < n; ++i) {
      const double m = window(i + 1 - tail);
      if (std::isfinite(m) && m < best) best = m, at_min = i;
    }
    const double last = window(n - tail);
    const double first = mean_loss(s.steps, 0, 5);
    // Overshoot: a step's loss well above where training started (an untrained
    // model's), within the first quarter — the update threw the weights past
    // anything they had learnt. Warm-up spikes of a rate too high look like this.
    std::size_t peak = 0;
    for (std::size_t i = 1; i < std::max<std::size_t>(n / 4, 2); ++i)
      if (s.steps[i].loss > s.steps[peak].loss) peak = i;
    const bool overshoot = peak > 0 && std::isfinite(s.steps[0].loss) && s.steps[0].loss > 0 &&
                           s.steps[peak].loss > 1.15 * s.steps[0].loss;
    const bool back_up = std::isfinite(last) && last > 1.06 * best + 0.05 && at_min + tail < n;
    const auto rollbacks = events_mentioning(e, {"rollback"}, {});
    if (overshoot || back_up || !rollbacks.empty()) {
      auto x = make(e, s, "lr_lower", "a lower learning rate: the loss overshot or went back up", {"optim.lr=" + num(lr / 3)},
                    "loss", 0.5);
      if (overshoot)
        x.evidence.push_back(fmt("loss %.4f at step %llu, %.0f%% above the %.4f it started from: the update overshot",
                                 s.steps[peak].loss, static_cast<unsigned long long>(s.steps[peak].step),
                                 100 * (s.steps[peak].loss / s.steps[0].loss - 1), s.steps[0].loss));
      if (back_up)
        x.evidence.push_back(fmt("loss %.4f at its lowest (median of %zu steps to step %llu), %.4f over the last %zu",
                                 best, tail, static_cast<unsigned long long>(s.steps[at_min].step), last, tail));
      if (!rollbacks.empty()) x.evidence.push_back(fmt("%zu rollback(s)", rollbacks.size()));
      x.evidence.push_back("learning rate " + num(lr));
      out.push_back(std::move(x));
    } else if (s.steps.size() >= 40 && std::isfinite(first) && first > 0 && (first - last) / first < 0.05) {
      auto x = make(e, s, "lr_higher", "a higher learning rate: the loss barely moves",
                    {"optim.lr=" + num(std::min(lr * 3, 1e-2))}, "loss", 0.4);
      x.evidence.push_back(fmt("loss %.4f over the first 5 steps, %.4f over the last %zu: %.1f%% lower; learning rate %s",
                               first, last, tail, 100 * (first - last) / first, num(lr).c_str()));
      out.push_back(std::move(x));
    } else if (std::isfinite(last) && s.state == "succeeded" && s.steps.size() >= 40) {
      // Still falling at its end: the last tenth below the one before by 2% or more.
      const double before = n >= 2 * tail ? window(n - 2 * tail) : std::nan("");
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
    if (!s.hpo && s.config.known) {
      for_stage(e, s, cpu, out);
      model_size(e, s, out);
    }
  data_rejects(e, out);
  std::stable_sort(out.begin(), out.end(), [](const suggestion& a, const suggestion& b) { return a.gain > b.gain; });
  return out;
}

}  // namespace loom::diagnose
