#include "services/trainer/train_cli.hpp"
#include "libs/status/unix_time.hpp"

#include "services/trainer/config.hpp"

#include "libs/atrest/object.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/engine/kernels.hpp"
#include "libs/runspec/run_config.hpp"
#include "services/trainer/run/sampler.hpp"
#include "services/trainer/run/snapshot_io.hpp"
#include "services/trainer/run/text_data.hpp"
#include "services/trainer/run/training_run.hpp"
#include "libs/ckpt/safetensors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace loom::trainer {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }

int fail(const error& e) {
  std::fprintf(stderr, "loom-trainer: %s\n", e.message.c_str());
  return exit_code(e.code);
}

// The data dir's keys at rest as this process's (libs/atrest; LOOM_AT_REST):
// a run seals its snapshots and data with them, a reader unseals.
status use_keys_at_rest(const std::string& data_dir) {
  layout::paths p;
  p.root = data_dir;
  auto k = atrest::open_process_keys_from_env(p.atrest_keys(), [](const char* n) { return std::getenv(n); },
                                              loom::wall_now());
  if (!k) return k.err();
  return ok_status();
}

// The checkpoint at `checkpoint`, verified with the key that signed it: the
// key lives in the data dir of the run that wrote it, looked up (--data-dir,
// else $LOOM_HOME, else the default data dir), never created — a new key
// would call every valid checkpoint tampered. `verb` names the caller.
result<opened_snapshot> open_signed(const std::string& checkpoint, const std::string& data_dir_opt, const std::string& verb) {
  if (std::error_code ec; !std::filesystem::exists(checkpoint, ec))
    return make_error(errc::not_found, "no checkpoint at " + checkpoint);
  const std::string data_dir = files::resolve_data_dir(data_dir_opt);
  auto key = existing_checkpoint_key(data_dir);
  if (!key) {
    if (key.code() != errc::not_found) return key.err();
    const char* from = !data_dir_opt.empty() ? "--data-dir"
                       : std::getenv("LOOM_HOME") && *std::getenv("LOOM_HOME") ? "$LOOM_HOME"
                                                                               : "the default data dir";
    return make_error(errc::not_found,
                      verb + " " + checkpoint + " needs the checkpoint signing key of the data dir "
                      "whose run wrote it (keys/checkpoint.key); looked in " + data_dir + " (" + from +
                      "): " + key.err().message + ". Pass --data-dir DIR of that deployment");
  }
  if (auto st = use_keys_at_rest(data_dir); !st) return st.err();
  return open_snapshot(checkpoint, *key);
}

}  // namespace

int train_main(int argc, char** argv) {
  auto a = parse_train_args(std::vector<std::string>(argv, argv + argc));
  if (!a) {
    std::fprintf(stderr, "loom-trainer train: %s\n%s", a.err().message.c_str(), train_usage);
    return 2;
  }
  if (a->help) return std::fputs(train_usage, stdout) < 0 ? 1 : 0;
  auto cfg = runspec::load_run_config(a->config, a->sets);
  if (!cfg) return fail(cfg.err());
  if (cfg->is_diloco())  // its sites sync with an aggregator: only the service's group runs them
    return fail(make_error(errc::invalid_argument,
                           a->config + ": kind \"diloco\" runs as a job (`loom job submit --template "
                           "pretrain-diloco-tiny`), one trainer per site against the aggregator; offline, "
                           "train it as kind = \"lm\" (--set kind=lm)"));
  if (!a->out.empty()) cfg->out_dir = a->out;
  // The run's directory: never a data dir's keys, store or job outputs (an
  // existing run there is refused below unless --resume: run_training).
  files::output_rules where;
  where.kind = files::output_kind::directory;
  where.option = a->out.empty() ? "output.dir" : "--out";
  if (auto st = layout::check_output({files::resolve_data_dir(a->data_dir)}, cfg->out_dir, where); !st)
    return fail(st.err());

  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  run_options o;
  o.resume = a->resume;
  o.data_dir = files::resolve_data_dir(a->data_dir);
  if (auto st = use_keys_at_rest(o.data_dir); !st) return fail(st.err());
  o.log = a->quiet ? nullptr : &std::cerr;
  o.stop = &g_stop;
  auto sum = run_training(*cfg, o);
  if (!sum) return fail(sum.err());
  if (a->json) {
    std::cout << nlohmann::json{{"first_step", sum->first_step}, {"steps", sum->steps},
                                {"loss", sum->last_loss},       {"snapshot", sum->snapshot},
                                {"params_sha256", sum->params_sha256}, {"stopped", sum->stopped},
                                {"precision", sum->precision}}
                     .dump()
              << "\n";
  } else {
    std::printf("%s at step %llu, loss %.4f (matmuls in %s); snapshot %s\nparameters sha256 %s\n",
                sum->stopped ? "stopped" : "done", static_cast<unsigned long long>(sum->steps),
                double(sum->last_loss), sum->precision.c_str(), sum->snapshot.c_str(), sum->params_sha256.c_str());
  }
  return 0;
}

int sample_main(int argc, char** argv) {
  auto parsed = parse_sample_args(std::vector<std::string>(argv, argv + argc));
  if (!parsed) {
    std::fprintf(stderr, "loom-trainer sample: %s\n%s", parsed.err().message.c_str(), sample_usage);
    return 2;
  }
  if (parsed->help) return std::fputs(sample_usage, stdout) < 0 ? 1 : 0;
  const sample_args& a = *parsed;
  sample_options so = a.sampling;
  engine::kernels::set_threads(a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  auto snap = open_signed(a.checkpoint, a.data_dir, "sampling");
  if (!snap) return fail(snap.err());
  for (const auto& w : snap->where.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const std::string& tok_path = a.tokenizer;
  auto bpe = load_run_tokenizer(tok_path);
  if (!bpe) return fail(bpe.err());
  if (!tok_path.empty()) {
    if (bpe->vocab_size() > static_cast<std::size_t>(snap->model.vocab))
      return fail(make_error(errc::invalid_argument, "--tokenizer " + tok_path + " has " +
                                                         std::to_string(bpe->vocab_size()) + " tokens, more than the "
                                                         "checkpoint's model.vocab " + std::to_string(snap->model.vocab)));
    auto eot = end_of_text_id(*bpe, tok_path);
    if (!eot) return fail(eot.err());
    so.stop_token = *eot;
  }
  auto prompt = bpe->encode(a.prompt);
  if (prompt.empty()) {
    std::fprintf(stderr, "loom-trainer sample: the prompt is empty\n");
    return 2;
  }
  const int T = std::min(snap->model.max_seq_len, static_cast<int>(prompt.size()) + so.max_tokens);
  auto model = engine::gpt2::create(snap->model, 1, T);
  if (!model) return fail(model.err());
  if (auto st = load_params(*snap, *model); !st) return fail(st.err());
  auto ids = generate(*model, prompt, so);
  if (!ids) return fail(ids.err());
  const std::string text = bpe->decode(*ids);
  if (a.json) {
    std::cout << nlohmann::json{{"checkpoint", snap->where.dir}, {"step", snap->where.step},
                                {"prompt", a.prompt}, {"completion", text}, {"tokens", *ids}}
                     .dump()
              << "\n";
  } else {
    std::cout << a.prompt << text << "\n";
  }
  return 0;
}

// Our engine's logits on fixed prompts, for an outside reader of an export to
// recompute (scripts/check-export): the same file export_dump writes.
int logits_main(int argc, char** argv) {
  auto parsed = parse_logits_args(std::vector<std::string>(argv, argv + argc));
  if (!parsed) {
    std::fprintf(stderr, "loom-trainer logits: %s\n%s", parsed.err().message.c_str(), logits_usage);
    return 2;
  }
  if (parsed->help) return std::fputs(logits_usage, stdout) < 0 ? 1 : 0;
  const logits_args& a = *parsed;
  files::output_rules where;  // checked before the model is read: a refusal costs nothing
  where.force = a.force;
  where.inputs = {a.checkpoint, a.tokenizer};
  if (auto st = layout::check_output({files::resolve_data_dir(a.data_dir)}, a.out, where); !st) return fail(st.err());
  engine::kernels::set_threads(a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  auto snap = open_signed(a.checkpoint, a.data_dir, "computing logits of");
  if (!snap) return fail(snap.err());
  auto bpe = load_run_tokenizer(a.tokenizer);
  if (!bpe) return fail(bpe.err());
  const model::gpt2_config& mc = snap->model;
  std::vector<std::vector<std::int32_t>> ids;
  std::size_t shortest = SIZE_MAX;
  for (const auto& p : a.prompts) {
    const auto e = bpe->encode(p);
    for (auto id : e)
      if (id >= static_cast<std::uint32_t>(mc.vocab))
        return fail(make_error(errc::invalid_argument, "the tokenizer gives id " + std::to_string(id) +
                                                           ", beyond the checkpoint's model.vocab " + std::to_string(mc.vocab)));
    ids.emplace_back(e.begin(), e.end());
    shortest = std::min(shortest, e.size());
  }
  const std::size_t T = a.tokens > 0 ? std::size_t(a.tokens) : std::min(shortest, std::size_t(mc.max_seq_len));
  if (T == 0 || T > shortest || T > std::size_t(mc.max_seq_len))
    return fail(make_error(errc::invalid_argument, "--tokens " + std::to_string(T) + ": the shortest prompt has " +
                                                       std::to_string(shortest) + " tokens and the model's max_seq_len is " +
                                                       std::to_string(mc.max_seq_len)));
  const int B = static_cast<int>(ids.size());
  std::vector<std::int32_t> tokens;
  for (const auto& e : ids) tokens.insert(tokens.end(), e.begin(), e.begin() + T);
  auto model = engine::gpt2::create(mc, B, static_cast<int>(T));
  if (!model) return fail(model.err());
  if (auto st = load_params(*snap, *model); !st) return fail(st.err());
  if (auto r = model->forward(tokens); !r) return fail(r.err());
  // (B, T, Vp) -> (B, T, V): the padding columns are ours, not the model's.
  std::vector<float> logits;
  const auto all = model->logits();
  for (std::size_t row = 0; row < std::size_t(B) * T; ++row)
    logits.insert(logits.end(), all.begin() + row * mc.padded_vocab, all.begin() + row * mc.padded_vocab + mc.vocab);
  const std::vector<ckpt::tensor_view> views = {
      {"tokens", ckpt::dtype::I32, {std::uint64_t(B), T}, tokens.data(), tokens.size() * 4},
      {"logits", ckpt::dtype::F32, {std::uint64_t(B), T, std::uint64_t(mc.vocab)}, logits.data(), logits.size() * 4},
  };
  const ckpt::metadata meta = {{"checkpoint", snap->where.dir}, {"step", std::to_string(snap->where.step)}};
  if (auto st = ckpt::write_safetensors(a.out, views, meta); !st) return fail(st.err());
  std::printf("logits of %s (step %llu): %d prompts x %zu tokens -> %s\n", snap->where.dir.c_str(),
              static_cast<unsigned long long>(snap->where.step), B, T, a.out.c_str());
  return 0;
}

}  // namespace loom::trainer
