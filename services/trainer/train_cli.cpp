#include "services/trainer/train_cli.hpp"

#include "libs/files/files.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "services/trainer/engine/kernels.hpp"
#include "libs/runspec/run_config.hpp"
#include "services/trainer/run/sampler.hpp"
#include "services/trainer/run/snapshot_io.hpp"
#include "services/trainer/run/text_data.hpp"
#include "services/trainer/run/training_run.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
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

// --name value / --name=value / --flag, in any order; positional args refused.
struct parsed_args {
  std::map<std::string, std::string> values;
  std::vector<std::string> sets;  // every --set
  std::map<std::string, bool> flags;
  std::string error;
};

parsed_args parse(int argc, char** argv, const std::vector<std::string>& valued,
                  const std::vector<std::string>& flags) {
  parsed_args p;
  auto is = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      p.error = "unexpected argument '" + a + "'";
      return p;
    }
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    if (is(flags, name) && !inline_value) {
      p.flags[name] = true;
    } else if (is(valued, name)) {
      if (!inline_value) {
        if (i + 1 >= argc) {
          p.error = "--" + name + " needs a value";
          return p;
        }
        value = argv[++i];
      }
      if (name == "set") p.sets.push_back(value);
      else p.values[name] = value;
    } else {
      p.error = "unknown option --" + name;
      return p;
    }
  }
  return p;
}

int fail(const error& e) {
  std::fprintf(stderr, "loom-trainer: %s\n", e.message.c_str());
  return exit_code(e.code);
}

}  // namespace

int train_main(int argc, char** argv) {
  const char* usage =
      "usage: loom-trainer train --config FILE [--resume] [--out DIR] [--set section.key=value]...\n"
      "                          [--data-dir D] [--quiet] [--json]\n";
  auto a = parse(argc, argv, {"config", "out", "set", "data-dir"}, {"resume", "quiet", "json", "help"});
  if (a.flags["help"]) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (!a.error.empty() || !a.values.count("config")) {
    std::fprintf(stderr, "loom-trainer train: %s\n%s", a.error.empty() ? "--config is required" : a.error.c_str(), usage);
    return 2;
  }
  auto cfg = runspec::load_run_config(a.values["config"], a.sets);
  if (!cfg) return fail(cfg.err());
  if (a.values.count("out")) cfg->out_dir = a.values["out"];

  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  run_options o;
  o.resume = a.flags["resume"];
  o.data_dir = files::resolve_data_dir(a.values["data-dir"]);
  o.log = a.flags["quiet"] ? nullptr : &std::cerr;
  o.stop = &g_stop;
  auto sum = run_training(*cfg, o);
  if (!sum) return fail(sum.err());
  if (a.flags["json"]) {
    std::cout << nlohmann::json{{"first_step", sum->first_step}, {"steps", sum->steps},
                                {"loss", sum->last_loss},       {"snapshot", sum->snapshot},
                                {"params_sha256", sum->params_sha256}, {"stopped", sum->stopped}}
                     .dump()
              << "\n";
  } else {
    std::printf("%s at step %llu, loss %.4f; snapshot %s\nparameters sha256 %s\n",
                sum->stopped ? "stopped" : "done", static_cast<unsigned long long>(sum->steps),
                double(sum->last_loss), sum->snapshot.c_str(), sum->params_sha256.c_str());
  }
  return 0;
}

int sample_main(int argc, char** argv) {
  const char* usage =
      "usage: loom-trainer sample --checkpoint DIR --prompt TEXT [--max-tokens N] [--temperature X]\n"
      "                           [--top-k K] [--seed S] [--threads N] [--tokenizer tokenizer.json]\n"
      "                           [--data-dir D] [--json]\n"
      "  --tokenizer: the run's data.tokenizer (default GPT-2)\n";
  auto a = parse(argc, argv,
                 {"checkpoint", "prompt", "max-tokens", "temperature", "top-k", "seed", "threads", "tokenizer", "data-dir"},
                 {"json", "help"});
  if (a.flags["help"]) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (!a.error.empty() || !a.values.count("checkpoint") || !a.values.count("prompt")) {
    std::fprintf(stderr, "loom-trainer sample: %s\n%s",
                 a.error.empty() ? "--checkpoint and --prompt are required" : a.error.c_str(), usage);
    return 2;
  }
  sample_options so;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  try {
    if (a.values.count("max-tokens")) so.max_tokens = std::stoi(a.values["max-tokens"]);
    if (a.values.count("temperature")) so.temperature = std::stof(a.values["temperature"]);
    if (a.values.count("top-k")) so.top_k = std::stoi(a.values["top-k"]);
    if (a.values.count("seed")) so.seed = std::stoull(a.values["seed"]);
    if (a.values.count("threads")) threads = std::stoi(a.values["threads"]);
  } catch (const std::exception&) {
    std::fprintf(stderr, "loom-trainer sample: a numeric option is not a number\n%s", usage);
    return 2;
  }
  if (so.max_tokens < 1 || so.top_k < 0 || threads < 1) {
    std::fprintf(stderr, "loom-trainer sample: --max-tokens and --threads must be >= 1, --top-k >= 0\n");
    return 2;
  }
  engine::kernels::set_threads(threads);
  // The key that signed the checkpoint lives in the data dir of the run that
  // wrote it: looked up (--data-dir, else $LOOM_HOME, else the default data
  // dir), never created — a new key would call every valid checkpoint tampered.
  if (std::error_code ec; !std::filesystem::exists(a.values["checkpoint"], ec))
    return fail(make_error(errc::not_found, "no checkpoint at " + a.values["checkpoint"]));
  const std::string data_dir = files::resolve_data_dir(a.values["data-dir"]);
  auto key = existing_checkpoint_key(data_dir);
  if (!key) {
    if (key.code() != errc::not_found) return fail(key.err());
    const char* from = !a.values["data-dir"].empty() ? "--data-dir"
                       : std::getenv("LOOM_HOME") && *std::getenv("LOOM_HOME") ? "$LOOM_HOME"
                                                                               : "the default data dir";
    return fail(make_error(errc::not_found,
                           "sampling " + a.values["checkpoint"] + " needs the checkpoint signing key of the data dir "
                           "whose run wrote it (keys/checkpoint.key); looked in " + data_dir + " (" + from +
                           "): " + key.err().message + ". Pass --data-dir DIR of that deployment"));
  }
  auto snap = open_snapshot(a.values["checkpoint"], *key);
  if (!snap) return fail(snap.err());
  for (const auto& w : snap->where.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const std::string tok_path = a.values.count("tokenizer") ? a.values["tokenizer"] : "";
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
  auto prompt = bpe->encode(a.values["prompt"]);
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
  if (a.flags["json"]) {
    std::cout << nlohmann::json{{"checkpoint", snap->where.dir}, {"step", snap->where.step},
                                {"prompt", a.values["prompt"]}, {"completion", text}, {"tokens", *ids}}
                     .dump()
              << "\n";
  } else {
    std::cout << a.values["prompt"] << text << "\n";
  }
  return 0;
}

}  // namespace loom::trainer
