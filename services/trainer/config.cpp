#include "services/trainer/config.hpp"

#include "libs/runtime/pressure.hpp"
#include "libs/wire/link_spec.hpp"

#include <charconv>
#include <optional>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace loom::trainer {

const char* const train_usage =
    "usage: loom-trainer train --config FILE [--resume] [--out DIR] [--set section.key=value]...\n"
    "                          [--data-dir D] [--quiet] [--json]\n";
const char* const sample_usage =
    "usage: loom-trainer sample --checkpoint DIR --prompt TEXT [--max-tokens N] [--temperature X]\n"
    "                           [--top-k K] [--seed S] [--threads N] [--tokenizer tokenizer.json]\n"
    "                           [--data-dir D] [--json]\n"
    "  --tokenizer: the run's data.tokenizer (default GPT-2)\n";

const char* const logits_usage =
    "usage: loom-trainer logits --checkpoint DIR --prompt TEXT [--prompt TEXT ...] --out FILE\n"
    "                           [--tokens N] [--tokenizer tokenizer.json] [--data-dir D] [--threads N] [--force]\n"
    "  --force: replace --out when it exists (never an input, never in a data dir's keys/ or store)\n"
    "  Writes our engine's logits for the first N tokens of each prompt as safetensors:\n"
    "  tokens (B, N) I32 and logits (B, N, vocab) F32 (default N: the shortest prompt's\n"
    "  token count, at most the model's max_seq_len). scripts/check-export compares them\n"
    "  with a PyTorch GPT-2 reading the Hugging Face export.\n";

namespace {

error bad(const std::string& why) { return make_error(errc::invalid_argument, why); }

// --name value / --name=value / --flag, in any order; positional words refused.
struct scanned {
  std::map<std::string, std::string> values;
  std::vector<std::string> sets;  // every --set
  std::vector<std::string> prompts;  // every --prompt (logits takes several)
  std::set<std::string> flags;
};

result<scanned> scan(const std::vector<std::string>& argv, const std::set<std::string>& valued,
                     const std::set<std::string>& flags) {
  scanned s;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2) return bad("unexpected argument '" + a + "'");
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flags.count(name)) {
      if (inline_value) return bad("--" + name + " takes no value");
      s.flags.insert(name);
      continue;
    }
    if (!valued.count(name)) return bad("unknown option --" + name);
    if (!inline_value) {
      if (i + 1 >= argv.size() || argv[i + 1].rfind("--", 0) == 0) return bad("--" + name + " needs a value");
      value = argv[++i];
    }
    if (value.empty()) return bad("--" + name + " needs a non-empty value");
    if (name == "set") s.sets.push_back(value);
    else s.values[name] = value;
    if (name == "prompt") s.prompts.push_back(value);
  }
  return s;
}

// A whole number in [lo, hi], all of `text`.
result<std::int64_t> whole(const std::string& name, const std::string& text, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    return bad("--" + name + " takes a whole number, not '" + text + "'");
  if (v < lo || v > hi)
    return bad("--" + name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + text);
  return v;
}

}  // namespace

result<train_args> parse_train_args(const std::vector<std::string>& argv) {
  auto s = scan(argv, {"config", "out", "set", "data-dir"}, {"resume", "quiet", "json", "help"});
  if (!s) return s.err();
  train_args a;
  a.help = s->flags.count("help") > 0;
  if (a.help) return a;
  if (!s->values.count("config")) return bad("--config is required");
  a.config = s->values["config"];
  a.out = s->values["out"];
  a.data_dir = s->values["data-dir"];
  a.sets = s->sets;
  a.resume = s->flags.count("resume") > 0;
  a.quiet = s->flags.count("quiet") > 0;
  a.json = s->flags.count("json") > 0;
  return a;
}

result<sample_args> parse_sample_args(const std::vector<std::string>& argv) {
  auto s = scan(argv, {"checkpoint", "prompt", "max-tokens", "temperature", "top-k", "seed", "threads", "tokenizer",
                       "data-dir"},
                {"json", "help"});
  if (!s) return s.err();
  sample_args a;
  a.help = s->flags.count("help") > 0;
  if (a.help) return a;
  if (!s->values.count("checkpoint") || !s->values.count("prompt"))
    return bad("--checkpoint and --prompt are required");
  a.checkpoint = s->values["checkpoint"];
  a.prompt = s->values["prompt"];
  a.tokenizer = s->values["tokenizer"];
  a.data_dir = s->values["data-dir"];
  a.json = s->flags.count("json") > 0;
  auto& v = s->values;
  if (v.count("max-tokens")) {
    auto n = whole("max-tokens", v["max-tokens"], 1, 1 << 20);
    if (!n) return n.err();
    a.sampling.max_tokens = static_cast<int>(*n);
  }
  if (v.count("top-k")) {
    auto n = whole("top-k", v["top-k"], 0, 1 << 24);
    if (!n) return n.err();
    a.sampling.top_k = static_cast<int>(*n);
  }
  if (v.count("seed")) {
    std::uint64_t seed = 0;
    const std::string& t = v["seed"];
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), seed);
    if (ec != std::errc() || end != t.data() + t.size()) return bad("--seed takes a whole number, not '" + t + "'");
    a.sampling.seed = seed;
  }
  if (v.count("threads")) {
    auto n = whole("threads", v["threads"], 1, 1024);
    if (!n) return n.err();
    a.threads = static_cast<int>(*n);
  }
  if (v.count("temperature")) {
    const std::string& t = v["temperature"];
    char* end = nullptr;
    const double x = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size() || !std::isfinite(x) || x < 0 || x > 100)
      return bad("--temperature takes a number in [0, 100] (0 = greedy), not '" + t + "'");
    a.sampling.temperature = static_cast<float>(x);
  }
  return a;
}

result<logits_args> parse_logits_args(const std::vector<std::string>& argv) {
  auto s = scan(argv, {"checkpoint", "prompt", "out", "tokens", "tokenizer", "data-dir", "threads"}, {"force", "help"});
  if (!s) return s.err();
  logits_args a;
  a.help = s->flags.count("help") > 0;
  if (a.help) return a;
  if (!s->values.count("checkpoint") || s->prompts.empty() || !s->values.count("out"))
    return bad("--checkpoint, --prompt and --out are required");
  a.checkpoint = s->values["checkpoint"];
  a.out = s->values["out"];
  a.force = s->flags.count("force") > 0;
  a.prompts = s->prompts;
  a.tokenizer = s->values["tokenizer"];
  a.data_dir = s->values["data-dir"];
  auto& v = s->values;
  if (v.count("tokens")) {
    auto n = whole("tokens", v["tokens"], 1, 1 << 20);
    if (!n) return n.err();
    a.tokens = static_cast<int>(*n);
  }
  if (v.count("threads")) {
    auto n = whole("threads", v["threads"], 1, 1024);
    if (!n) return n.err();
    a.threads = static_cast<int>(*n);
  }
  return a;
}

result<stage_isolation> stage_isolation_from_env(const std::function<const char*(const char*)>& getenv) {
  stage_isolation s;
  auto whole = [](const char* v, std::uint64_t lo, std::uint64_t hi) -> std::optional<std::uint64_t> {
    std::uint64_t x = 0;
    const char* end = v + std::strlen(v);
    auto [p, ec] = std::from_chars(v, end, x);
    if (ec != std::errc() || p != end || x < lo || x > hi) return std::nullopt;
    return x;
  };
  if (const char* v = getenv("LOOM_STAGE_PROCESSES"); v && *v) {
    if (std::string(v) != "0" && std::string(v) != "1")
      return make_error(errc::invalid_argument, std::string("LOOM_STAGE_PROCESSES=") + v + ": 0 or 1 is expected");
    s.processes = std::string(v) == "1";
  }
  if (const char* v = getenv("LOOM_STAGE_MEMORY_MB"); v && *v) {
    auto x = whole(v, 64, 16777216);
    if (!x) return make_error(errc::invalid_argument, std::string("LOOM_STAGE_MEMORY_MB=") + v + ": MiB 64..16777216 is expected");
    s.memory_mb = *x;
  }
  if (const char* v = getenv("LOOM_INJECT_LEAK"); v && *v) {
    const std::string t = v;
    const auto colon = t.rfind(':');
    auto x = colon == std::string::npos ? std::nullopt : whole(t.c_str() + colon + 1, 1, 4096);
    if (!x || colon == 0)
      return make_error(errc::invalid_argument, "LOOM_INJECT_LEAK=" + t + ": JOB:MIB (MiB 1..4096 per step) is expected");
    s.leak_job = t.substr(0, colon);
    s.leak_mib = *x;
  }
  return s;
}

bool serve_env_ok(char** env) {
  auto st = wire::check_link_shape_env(env);
  auto from_env = [env](const char* name) -> const char* {
    const std::size_t n = std::strlen(name);
    for (char** e = env; e && *e; ++e)
      if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return nullptr;
  };
  if (st) {  // load shedding's thresholds (libs/runtime/pressure.hpp), from the same environment
    auto shed = runtime::shed_settings_from_env(from_env);
    if (!shed) st = shed.err();
  }
  if (st) {  // stage processes
    auto iso = stage_isolation_from_env(from_env);
    if (!iso) st = iso.err();
  }
  if (!st) std::fprintf(stderr, "loom-trainer: %s\n", st.err().message.c_str());
  return st.ok();
}

}  // namespace loom::trainer
