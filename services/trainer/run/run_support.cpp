#include "services/trainer/run/run_support.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/manifest.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include <unistd.h>

namespace loom::trainer {

namespace fs = std::filesystem;


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
result<std::string> data_identity(const std::string& dir, bool with_placement) {
  auto text = files::read_file(dir + "/" + std::string(shards::manifest_file_name));
  if (!text) return text.err();
  if (with_placement) return crypto::sha256_hex(*text);
  auto m = shards::parse_manifest(*text, dir + "/" + std::string(shards::manifest_file_name));
  if (!m) return m.err();
  bool placed = false;
  for (auto& s : m->shards) placed |= !std::exchange(s.node, std::string()).empty();
  for (auto& t : m->media) placed |= !std::exchange(t.node, std::string()).empty();
  return crypto::sha256_hex(placed ? shards::to_json(*m) : *text);  // unplaced: the file's own hash, as always
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


std::uint64_t machine_memory() {
  return static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(::sysconf(_SC_PAGE_SIZE));
}

engine::adamw_config adam_of(const runspec::run_config& c) {
  engine::adamw_config a;
  a.beta1 = c.adam.beta1;
  a.beta2 = c.adam.beta2;
  a.eps = c.adam.eps;
  a.weight_decay = c.adam.weight_decay;
  return a;
}

engine::lr_schedule schedule_of(const runspec::run_config& c) {
  engine::lr_schedule s;
  s.max_lr = c.lr;
  s.min_lr = c.min_lr;
  s.warmup_steps = c.warmup_steps;
  s.total_steps = c.steps;
  return s;
}

// Warnings of a snapshot load (refused newer snapshots) go to the log and,
// as one "snapshot_fallback" notice, to the job.
void report_warnings(const run_options& o, const ckpt::loaded_snapshot& where, const std::string& what) {
  for (const auto& w : where.warnings) say(o, "warning: " + w);
  if (where.warnings.empty() || !o.on_notice) return;
  std::string all;
  for (const auto& w : where.warnings) all += (all.empty() ? "" : "; ") + w;
  o.on_notice("snapshot_fallback", what + ": " + all);
}

engine::precision_choice resolve_precision(const std::string& asked) {
  return engine::choose_precision(engine::precision_from(asked).value_or(engine::precision::fp32),
                                  engine::probe_bf16());
}

result<engine::gpt2> create_model(const model::gpt2_config& cfg, int batch, int seq_len,
                                  engine::precision_choice& chosen) {
  auto made = engine::gpt2::create(cfg, batch, seq_len, chosen.used);
  if (!made && made.code() == errc::unavailable && chosen.used == engine::precision::bf16) {
    chosen = {engine::precision::fp32, "bf16 trains in fp32: " + made.err().message};
    made = engine::gpt2::create(cfg, batch, seq_len, engine::precision::fp32);
  }
  return made;
}

void report_precision(const run_options& o, const engine::precision_choice& chosen) {
  const std::string used(engine::to_string(chosen.used));
  say(o, "precision: " + used + " (" + chosen.why + ")");
  if (o.on_precision) o.on_precision(used, chosen.why);
}

void note_precision_change(const run_options& o, const std::string& snapshot_dir, const std::string& was,
                           const std::string& now) {
  if (was == now) return;
  const std::string text = snapshot_dir + " was trained in " + was + "; this machine continues in " + now +
                           (now == "fp32" ? " (no native bf16 matmul here; the fp32 masters carry on unchanged)"
                                          : " (its matmuls multiply bf16 natively here)");
  say(o, text);
  if (o.on_notice) o.on_notice("precision_changed", text);
}

std::string step_anomaly(const engine::step_stats& s, std::uint64_t step, std::span<const float> recent,
                         const anomaly_limits& limits) {
  const int window = limits.window;
  const double zscore = limits.zscore;
  if (!std::isfinite(s.loss) || !std::isfinite(s.grad_norm))
    return fmt("step %llu: loss %g, gradient norm %g: not finite", static_cast<unsigned long long>(step),
               double(s.loss), double(s.grad_norm));
  if (limits.diverge_ratio > 0 && !recent.empty()) {
    // The start: the mean of the run's first (up to) 5 losses, so one noisy
    // early batch neither sets nor trips the bar.
    const std::size_t n = std::min<std::size_t>(recent.size(), 5);
    double first = 0;
    for (std::size_t i = 0; i < n; ++i) first += recent[i];
    first /= static_cast<double>(n);
    if (s.loss > limits.diverge_ratio * first && s.loss - first > 1.0)
      return fmt("step %llu: loss %.4f diverged: %.1fx the run's start %.4f (anomaly.diverge_ratio %.1f)",
                 static_cast<unsigned long long>(step), double(s.loss), double(s.loss) / first, first,
                 limits.diverge_ratio);
  }
  if (zscore <= 0 || window < 2 || recent.size() < static_cast<std::size_t>(window)) return "";
  double mean = 0, var = 0;
  const auto first = recent.end() - window;
  for (auto it = first; it != recent.end(); ++it) mean += *it;
  mean /= window;
  for (auto it = first; it != recent.end(); ++it) var += (*it - mean) * (*it - mean);
  const double sd = std::sqrt(var / (window - 1));
  if (s.loss > mean + zscore * sd && s.loss > mean * 1.01)
    return fmt("step %llu: loss %.4f is a spike (mean %.4f, sd %.4f over %d steps, z > %.1f)",
               static_cast<unsigned long long>(step), double(s.loss), mean, sd, window, zscore);
  return "";
}

}  // namespace loom::trainer
