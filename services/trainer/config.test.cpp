// loom-trainer's own command lines: typed, strict, every mistake named.
#include "services/trainer/config.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace loom;
using namespace loom::trainer;

TEST_CASE("loom-trainer train reads its options and keeps every --set in order") {
  auto a = parse_train_args({"--config", "run.toml", "--set", "train.steps=5", "--set=optim.lr=0.1", "--resume",
                             "--out=/tmp/x", "--json"});
  REQUIRE(a.ok());
  CHECK(a->config == "run.toml");
  CHECK(a->sets == std::vector<std::string>{"train.steps=5", "optim.lr=0.1"});
  CHECK(a->resume);
  CHECK(a->json);
  CHECK_FALSE(a->quiet);
  CHECK(a->out == "/tmp/x");
  CHECK(parse_train_args({"--help"})->help);
}

TEST_CASE("loom-trainer train refuses unknown options, missing values and stray words by name") {
  auto msg = [](std::vector<std::string> v) {
    auto a = parse_train_args(v);
    return a.ok() ? std::string("ok") : a.err().message;
  };
  CHECK(msg({"--config", "c", "--verbose"}) == "unknown option --verbose");
  CHECK(msg({"--config"}) == "--config needs a value");
  CHECK(msg({"--config", "--resume"}) == "--config needs a value");  // an option is not swallowed as a value
  CHECK(msg({"--config="}) == "--config needs a non-empty value");
  CHECK(msg({"--config", "c", "extra"}) == "unexpected argument 'extra'");
  CHECK(msg({"--resume=yes", "--config", "c"}) == "--resume takes no value");
  CHECK(msg({"--resume"}) == "--config is required");
}

TEST_CASE("loom-trainer sample parses numbers strictly and within their ranges") {
  auto a = parse_sample_args({"--checkpoint", "/c", "--prompt", "Once", "--max-tokens", "12", "--temperature", "0",
                              "--top-k", "0", "--seed", "18446744073709551615", "--threads", "2"});
  REQUIRE(a.ok());
  CHECK(a->sampling.max_tokens == 12);
  CHECK(a->sampling.temperature == 0.0f);
  CHECK(a->sampling.top_k == 0);
  CHECK(a->sampling.seed == 18446744073709551615ull);
  CHECK(a->threads == 2);
  auto msg = [](std::vector<std::string> extra) {
    std::vector<std::string> v = {"--checkpoint", "/c", "--prompt", "p"};
    v.insert(v.end(), extra.begin(), extra.end());
    auto r = parse_sample_args(v);
    return r.ok() ? std::string("ok") : r.err().message;
  };
  CHECK(msg({"--max-tokens", "abc"}).find("--max-tokens takes a whole number") != std::string::npos);
  CHECK(msg({"--max-tokens", "0"}).find("--max-tokens must be in [1,") != std::string::npos);
  CHECK(msg({"--max-tokens", "12x"}).find("--max-tokens takes a whole number") != std::string::npos);
  CHECK(msg({"--top-k", "-1"}).find("--top-k must be in [0,") != std::string::npos);
  CHECK(msg({"--temperature", "nan"}).find("--temperature takes a number in [0, 100]") != std::string::npos);
  CHECK(msg({"--temperature", "1e300"}).find("--temperature") != std::string::npos);
  CHECK(msg({"--seed", "-5"}).find("--seed takes a whole number") != std::string::npos);
  CHECK(msg({"--threads", "1000000"}).find("--threads must be in [1, 1024]") != std::string::npos);
  CHECK(parse_sample_args({"--prompt", "p"}).err().message == "--checkpoint and --prompt are required");
}

TEST_CASE("loom-trainer logits keeps every --prompt in order and needs a checkpoint, a prompt and --out") {
  auto a = parse_logits_args({"--checkpoint", "/c", "--prompt", "one", "--out", "/o.safetensors", "--prompt=two",
                              "--tokens", "16", "--threads", "1"});
  REQUIRE(a.ok());
  CHECK(a->prompts == std::vector<std::string>{"one", "two"});
  CHECK(a->checkpoint == "/c");
  CHECK(a->out == "/o.safetensors");
  CHECK(a->tokens == 16);
  CHECK(a->threads == 1);
  CHECK(parse_logits_args({"--checkpoint", "/c", "--out", "/o"}).err().message ==
        "--checkpoint, --prompt and --out are required");
  CHECK(parse_logits_args({"--checkpoint", "/c", "--prompt", "p", "--out", "/o", "--tokens", "0"})
            .err().message.find("--tokens must be in [1,") != std::string::npos);
  CHECK(parse_logits_args({"--checkpoint", "/c", "--prompt", "p", "--out", "/o", "--max-tokens", "3"})
            .err().message == "unknown option --max-tokens");
}

TEST_CASE("serve's stage-process variables parse strictly and a bad one is refused naming it") {
  std::map<std::string, std::string> env;
  auto get = [&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto none = stage_isolation_from_env(get);
  REQUIRE(none.ok());
  CHECK(none->processes);  // the default: each plain stage in a process of its own
  env = {{"LOOM_STAGE_PROCESSES", "0"}};
  auto off = stage_isolation_from_env(get);
  REQUIRE(off.ok());
  CHECK_FALSE(off->processes);  // on the service's training thread
  env = {{"LOOM_STAGE_PROCESSES", "1"}, {"LOOM_STAGE_MEMORY_MB", "2048"}, {"LOOM_INJECT_LEAK", "job-000003:64"}};
  auto on = stage_isolation_from_env(get);
  REQUIRE(on.ok());
  CHECK(on->processes);
  CHECK(on->memory_mb == 2048);
  CHECK(on->leak_job == "job-000003");
  CHECK(on->leak_mib == 64);
  for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{{"LOOM_STAGE_PROCESSES", "yes"},
                                                                      {"LOOM_STAGE_MEMORY_MB", "10"},
                                                                      {"LOOM_STAGE_MEMORY_MB", "12abc"},
                                                                      {"LOOM_INJECT_LEAK", "job-000003"},
                                                                      {"LOOM_INJECT_LEAK", ":64"},
                                                                      {"LOOM_INJECT_LEAK", "job:0"}}) {
    auto bad_env = env;
    bad_env[k] = v;
    std::swap(env, bad_env);
    auto bad = stage_isolation_from_env(get);
    std::swap(env, bad_env);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.err().message.starts_with(k + "=" + v + ": "));
  }
}
