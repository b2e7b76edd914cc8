#include "libs/runspec/job_template.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>

using namespace loom;
using namespace loom::runspec;

namespace {
constexpr const char* pipeline = R"(
[job]
name = "pipeline"
priority = "high"
stages = ["pretrain", "sft"]

[model]
layers = 2

[train]
steps = 100
batch = 4

[stage.sft]
"train.steps" = 20
"data.format" = "sft"
)";
}  // namespace

TEST_CASE("a template resolves into one run config per stage, stage tables and overrides applied in order") {
  auto p = resolve_template("pipeline-x", pipeline, {"text=/data/c.txt", "steps=50", "sft.optim.lr=0.001"});
  REQUIRE(p.ok());
  CHECK(p->name == "pipeline");
  CHECK(p->priority_class == "high");
  REQUIRE(p->stages.size() == 2);
  CHECK(p->stages[0].name == "pretrain");
  CHECK(p->stages[0].spec.steps == 50);  // --set steps applies to every stage, after the stage tables
  CHECK(p->stages[1].spec.steps == 50);
  CHECK(p->stages[0].config_toml.find("text = '/data/c.txt'") != std::string::npos);
  CHECK(p->stages[0].config_toml.find("format") == std::string::npos);
  CHECK(p->stages[1].config_toml.find("format = 'sft'") != std::string::npos);
  CHECK(p->stages[1].config_toml.find("lr = 0.001") != std::string::npos);
  CHECK(p->stages[0].config_toml.find("lr") == std::string::npos);
  CHECK(p->stages[0].config_toml.find("layers = 2") != std::string::npos);

  auto q = resolve_template("pipeline-x", pipeline, {"text=/data/c.txt"});
  REQUIRE(q.ok());
  CHECK(q->stages[1].spec.steps == 20);
}

TEST_CASE("a template without a [job] section is one pretrain stage at normal priority") {
  auto p = resolve_template("plain", "[train]\nsteps = 7\n", {"text=/data/c.txt"});
  REQUIRE(p.ok());
  CHECK(p->name == "plain");
  CHECK(p->priority_class == "normal");
  REQUIRE(p->stages.size() == 1);
  CHECK(p->stages[0].name == "pretrain");
  CHECK(p->stages[0].spec.steps == 7);
}

TEST_CASE("bad templates and overrides are refused naming the template and the key") {
  auto msg = [](result<job_plan> r) { return r.ok() ? std::string("ok") : r.err().message; };
  CHECK(msg(resolve_template("t", "[job\n", {})).find("template t: line 1") != std::string::npos);
  CHECK(msg(resolve_template("t", "[jobs]\n", {})).find("[jobs] is not a section") != std::string::npos);
  CHECK(msg(resolve_template("t", "[job]\npriority = \"urgent\"\n", {})).find("job.priority") != std::string::npos);
  CHECK(msg(resolve_template("t", "[job]\nstages = []\n", {})).find("job.stages") != std::string::npos);
  CHECK(msg(resolve_template("t", "[job]\nstages = [\"a\", \"a\"]\n", {})).find("listed twice") != std::string::npos);
  CHECK(msg(resolve_template("t", "[stage.sft]\n\"train.steps\" = 1\n", {})).find("names no stage") != std::string::npos);
  CHECK(msg(resolve_template("t", pipeline, {"nokey"})).find("expected key=value") != std::string::npos);
  CHECK(msg(resolve_template("t", pipeline, {"colour=red"})).find("unknown key") != std::string::npos);
  CHECK(msg(resolve_template("t", pipeline, {"gpu.count=2"})).find("gpu.count is not section.key") != std::string::npos);
}

TEST_CASE("priority classes are ordered low < normal < high") {
  CHECK(priority_of("low") < priority_of("normal"));
  CHECK(priority_of("normal") < priority_of("high"));
  CHECK(priority_of("urgent") == -1);
}

TEST_CASE("[parallel] gives each stage its trainer group: a gang, an elastic range, or one trainer") {
  auto one = resolve_template("p", pipeline, {"text=/data/c.txt"});
  REQUIRE(one.ok());
  CHECK(one->stages[0].spec.min_trainers == 1);
  CHECK(one->stages[0].spec.max_trainers == 1);

  auto gang = resolve_template("p", pipeline, {"text=/data/c.txt", "train.grad_accum=4", "pretrain.trainers=2"});
  REQUIRE(gang.ok());
  CHECK(gang->stages[0].spec.min_trainers == 2);
  CHECK(gang->stages[0].spec.max_trainers == 2);
  CHECK(gang->stages[1].spec.max_trainers == 1);  // only pretrain was given two
  auto back = parse_run_config(gang->stages[0].config_toml, "stage.toml");  // what the trainer reads
  REQUIRE(back.ok());
  CHECK(back->min_trainers == 2);
  CHECK(back->max_trainers == 2);

  auto elastic = resolve_template("p", pipeline,
                                  {"text=/data/c.txt", "train.grad_accum=4", "parallel.min_trainers=1", "parallel.max_trainers=4"});
  REQUIRE(elastic.ok());
  CHECK(elastic->stages[1].spec.min_trainers == 1);
  CHECK(elastic->stages[1].spec.max_trainers == 4);
}

TEST_CASE("[parallel] refuses a group larger than train.grad_accum, min above max, and unknown keys, naming them") {
  auto big = resolve_template("p", pipeline, {"text=/data/c.txt", "trainers=2"});
  REQUIRE(!big.ok());
  CHECK(big.err().message.find("stage pretrain: ") != std::string::npos);
  CHECK(big.err().message.find("2 trainers but train.grad_accum is 1") != std::string::npos);
  auto inverted = resolve_template("p", pipeline,
                                   {"text=/data/c.txt", "train.grad_accum=8", "parallel.min_trainers=3", "parallel.max_trainers=2"});
  REQUIRE(!inverted.ok());
  CHECK(inverted.err().message.find("parallel.min_trainers 3 exceeds parallel.max_trainers 2") != std::string::npos);
  auto unknown = resolve_template("p", pipeline, {"text=/data/c.txt", "parallel.ranks=2"});
  REQUIRE(!unknown.ok());
  CHECK(unknown.err().message.find("parallel.ranks is not a known key") != std::string::npos);
  auto zero = resolve_template("p", pipeline, {"text=/data/c.txt", "trainers=0"});
  REQUIRE(!zero.ok());
  CHECK(zero.err().message.find("parallel.trainers must be in [1, 64]") != std::string::npos);
}

TEST_CASE("a bad override is refused at resolution naming the key, the stage and where it came from") {
  auto msg = [](result<job_plan> r) { return r.ok() ? std::string("ok") : r.err().message; };
  const auto lr = msg(resolve_template("p", pipeline, {"text=/data/c.txt", "optim.lr=-1"}));
  CHECK(lr.find("template p: stage pretrain") != std::string::npos);
  CHECK(lr.find("optim.lr must be in [0, 10], got -1") != std::string::npos);
  CHECK(lr.find("(--set)") != std::string::npos);
  CHECK(msg(resolve_template("p", pipeline, {"text=/data/c.txt", "train.colour=3"})).find("train.colour is not a known key") !=
        std::string::npos);
  // A value from the template itself is named by its file and line.
  const auto line = msg(resolve_template("p", "[train]\nsteps = 7\nbatch = 0\n", {"text=/data/c.txt"}));
  CHECK(line.find("p.toml:3: train.batch must be in [1,") != std::string::npos);
  // No data source, a relative path, two sources.
  CHECK(msg(resolve_template("p", pipeline, {})).find("exactly one of data.shards") != std::string::npos);
  CHECK(msg(resolve_template("p", pipeline, {"text=c.txt"})).find("data.text c.txt must be an absolute path") !=
        std::string::npos);
}

TEST_CASE("an unknown stage kind is refused by name, an hpo stage without its search too, a known one is taken") {
  auto msg = [](result<job_plan> r) { return r.ok() ? std::string("ok") : r.err().message; };
  CHECK(msg(resolve_template("p", pipeline, {"text=/data/c.txt", "pretrain.kind=hpo"})).find("no [hpo] table") !=
        std::string::npos);
  CHECK(msg(resolve_template("p", pipeline, {"text=/data/c.txt", "kind=magic"})).find("kind \"magic\" is not a stage kind") !=
        std::string::npos);
  auto ok = resolve_template("p", "kind = \"sft\"\n[train]\nsteps = 2\n", {"text=/data/c.txt"});
  REQUIRE(ok.ok());
  CHECK(ok->stages[0].spec.kind == "sft");
  CHECK(ok->stages[0].spec.format == "sft");
}

TEST_CASE("the resolved stage carries its memory estimate and group size") {
  auto p = resolve_template("p", pipeline, {"text=/data/c.txt", "train.grad_accum=4", "pretrain.trainers=2"});
  REQUIRE(p.ok());
  const auto& s = p->stages[0].spec;
  CHECK(s.memory().total() > s.memory().params * 4);  // weights, gradients, AdamW and activations
  CHECK(s.memory().batches == loom::model::estimate_training(s.model, 4, 64, 2, false).batches);  // 4 / 2 held
}

TEST_CASE("the template cache parses a text once and resolves each submit's overrides as resolve_template does") {
  template_cache cache(2);
  const std::vector<std::vector<std::string>> submits = {
      {"text=/data/a.txt", "steps=50"}, {"text=/data/b.txt", "sft.optim.lr=0.002"}, {"text=/data/a.txt", "steps=50"}};
  for (const auto& o : submits) {
    auto cached = cache.resolve("pipeline-x", pipeline, o);
    auto fresh = resolve_template("pipeline-x", pipeline, o);
    REQUIRE(cached.ok());
    REQUIRE(fresh.ok());
    REQUIRE(cached->stages.size() == fresh->stages.size());
    for (std::size_t i = 0; i < fresh->stages.size(); ++i) CHECK(cached->stages[i].config_toml == fresh->stages[i].config_toml);
    CHECK(cached->priority_class == "high");
  }
  CHECK(cache.misses() == 1);
  CHECK(cache.hits() == 2);
  // An override that fails refuses that submit only; the kept text is untouched.
  auto bad = cache.resolve("pipeline-x", pipeline, {"nosuchkey=1"});
  CHECK_FALSE(bad.ok());
  auto again = cache.resolve("pipeline-x", pipeline, {"text=/data/a.txt"});
  REQUIRE(again.ok());
  CHECK(again->stages[0].config_toml.find("nosuchkey") == std::string::npos);
  // A bad text is refused every time with its line, and never kept.
  auto broken = cache.resolve("broken", "[model\n", {});
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.err().message.find("template broken: line 1") != std::string::npos);
  CHECK(cache.misses() == 1);
  // The same text under another name is another entry; beyond capacity the cache starts over.
  REQUIRE(cache.resolve("pipeline-y", pipeline, {"text=/data/a.txt"}).ok());
  REQUIRE(cache.resolve("pipeline-z", pipeline, {"text=/data/a.txt"}).ok());
  CHECK(cache.misses() == 3);
  REQUIRE(cache.resolve("pipeline-z", pipeline, {"text=/data/a.txt"}).ok());
  CHECK(cache.hits() == 5);
}

namespace {
constexpr const char* rlhf = R"(
[job]
stages = ["pretrain", "sft", "rm", "rl"]

[model]
layers = 2
vocab = 256
padded_vocab = 256

[train]
steps = 10
batch = 8

[stage.sft]
"data.format" = "sft"

[stage.rm]
kind = "rm"
"data.synthetic_prefs" = true
"data.tokenizer" = "bytes"

[stage.rl]
kind = "rl"
"data.synthetic_prefs" = true
"data.tokenizer" = "bytes"
"align.samples_per_prompt" = 4
"reward.model" = "${stage.rm.checkpoint}"
)";
}  // namespace

TEST_CASE("an alignment stage after sft needs no init_from, and as a job's first stage a dpo stage is refused") {
  auto p = resolve_template("rlhf", rlhf, {"text=/data/c.txt"});
  REQUIRE_MESSAGE(p.ok(), p.err().message);
  REQUIRE(p->stages.size() == 4);
  CHECK(p->stages[2].spec.kind == "rm");
  CHECK(p->stages[3].spec.kind == "rl");
  CHECK(p->stages[3].spec.align.reward_model == "${stage.rm.checkpoint}");
  CHECK(p->stages[3].spec.format == "preference");
  auto first = resolve_template("d", "kind = \"dpo\"\n[data]\nsynthetic_prefs = true\n", {});
  REQUIRE_FALSE(first.ok());
  CHECK(first.err().message.find("a dpo stage starts from an SFT checkpoint: set model.init_from") != std::string::npos);
}

TEST_CASE("the scheduler fills a stage.rm.checkpoint reference with that stage's checkpoint root at placement") {
  auto p = resolve_template("rlhf", rlhf, {"text=/data/c.txt"});
  REQUIRE(p.ok());
  const std::string filled = fill_stage_references(p->stages[3].config_toml, "/jobs/j-1");
  CHECK(filled.find("model = '/jobs/j-1/rm/checkpoints'") != std::string::npos);
  CHECK(filled.find("${") == std::string::npos);
  CHECK(fill_stage_references("a = 1\n", "/x") == "a = 1\n");
}

TEST_CASE("reward.model naming no earlier rm stage, and an unknown stage kind, are refused by name") {
  auto msg = [](result<job_plan> r) { return r.ok() ? std::string("ok") : r.err().message; };
  CHECK(msg(resolve_template("rlhf", rlhf, {"text=/data/c.txt", "rl.reward.model=${stage.sft.checkpoint}"}))
            .find("reward.model names stage sft of kind \"sft\", not an rm stage") != std::string::npos);
  CHECK(msg(resolve_template("rlhf", rlhf, {"text=/data/c.txt", "rl.reward.model=${stage.later.checkpoint}"}))
            .find("must be \"${stage.NAME.checkpoint}\" naming an earlier stage") != std::string::npos);
  const std::string unknown = msg(resolve_template("rlhf", rlhf, {"text=/data/c.txt", "rm.kind=ppo"}));
  CHECK(unknown.find("stage rm") != std::string::npos);
  CHECK(unknown.find("kind \"ppo\" is not a stage kind") != std::string::npos);
}

TEST_CASE("every template under templates/ resolves, the alignment ones into rm, dpo and rl stages") {
  const std::string dir = std::string(LOOM_SOURCE_DIR) + "/templates/";
  std::map<std::string, std::vector<std::string>> kinds;
  for (const char* name : {"pretrain-tiny", "pipeline-tiny", "pipeline-test", "sft-tiny", "rm-tiny", "dpo-tiny",
                           "rl-tiny", "pipeline-dpo-tiny", "pipeline-rlhf-tiny"}) {
    std::ifstream in(dir + name + ".toml");
    REQUIRE_MESSAGE(in.good(), name);
    std::stringstream text;
    text << in.rdbuf();
    std::vector<std::string> sets = {"text=/data/c.txt"};
    if (std::string(name) == "dpo-tiny" || std::string(name) == "rl-tiny")
      sets.push_back("model.init_from=/runs/sft/checkpoints");
    if (std::string(name) == "sft-tiny") sets = {"sft=/data/chat.jsonl"};
    auto p = resolve_template(name, text.str(), sets);
    REQUIRE_MESSAGE(p.ok(), name << ": " << p.err().message);
    for (const auto& s : p->stages) kinds[name].push_back(s.spec.kind);
  }
  CHECK(kinds["rm-tiny"] == std::vector<std::string>{"rm"});
  CHECK(kinds["pipeline-dpo-tiny"] == std::vector<std::string>{"lm", "sft", "dpo"});
  CHECK(kinds["pipeline-rlhf-tiny"] == std::vector<std::string>{"lm", "sft", "rm", "rl"});
  std::ifstream in(dir + "dpo-tiny.toml");
  std::stringstream text;
  text << in.rdbuf();
  auto orphan = resolve_template("dpo-tiny", text.str(), {});
  REQUIRE_FALSE(orphan.ok());  // no SFT parent
  CHECK(orphan.err().message.find("a dpo stage starts from an SFT checkpoint") != std::string::npos);
}

TEST_CASE("a stage name is a short word: 300 characters, control characters and a section's name are refused") {
  auto msg = [](result<job_plan> r) { return r.ok() ? std::string("ok") : r.err().message; };
  auto with = [](const std::string& name) {
    return "[job]\nstages = [\"" + name + "\"]\n[train]\nsteps = 2\n";
  };
  const std::string long_name(300, 'a');
  const std::string m = msg(resolve_template("t", with(long_name), {"text=/d/c.txt"}));
  CHECK(m.find("job.stages: stage name \"aaaa") != std::string::npos);
  CHECK(m.find("(300 characters) must be 1 to 32 letters, digits, '-' or '_'") != std::string::npos);
  const std::string ctl = msg(resolve_template("t", with("pre\\ntrain"), {"text=/d/c.txt"}));  // TOML "\n": a newline
  CHECK(ctl.find("stage name \"pre\\ntrain\" must be 1 to 32") != std::string::npos);
  CHECK(msg(resolve_template("t", with("pre\\u0001"), {"text=/d/c.txt"})).find("\\x01") != std::string::npos);
  CHECK(msg(resolve_template("t", with("a.b"), {"text=/d/c.txt"})).find("must be 1 to 32") != std::string::npos);
  CHECK(msg(resolve_template("t", with("-x"), {"text=/d/c.txt"})).find("must be 1 to 32") != std::string::npos);
  CHECK(msg(resolve_template("t", with("train"), {"text=/d/c.txt"})).find("is a run section's name") !=
        std::string::npos);
  CHECK(msg(resolve_template("t", with(std::string(32, 'b')), {"text=/d/c.txt"})) == "ok");
  CHECK(msg(resolve_template("t", with("Stage_2-b"), {"text=/d/c.txt"})) == "ok");
  CHECK(stage_name_problem("pretrain").empty());
  CHECK(!stage_name_problem("").empty());
}

TEST_CASE("an override value that is not exactly one TOML value is refused naming the key") {
  auto msg = [](result<job_plan> r) { return r.ok() ? std::string("ok") : r.err().message; };
  const std::string nl = msg(resolve_template("t", pipeline, {"text=/d/c.txt", "train.steps=5\nrogue=1"}));
  CHECK(nl.find("--set train.steps: \"5\\nrogue=1\" is not one TOML value: it holds a control character") !=
        std::string::npos);
  CHECK(msg(resolve_template("t", pipeline, {"text=/d/c.txt", "steps=5\r"})).find("--set train.steps") !=
        std::string::npos);
  CHECK(msg(resolve_template("t", pipeline, {"text=/d/c.txt", "sft.optim.lr=\"0.1\" x"}))
            .find("--set sft.optim.lr: \"\\\"0.1\\\" x\" is not one TOML value") != std::string::npos);
  CHECK(msg(resolve_template("t", pipeline, {"text=/d/c.txt", "dataset=[1, 2"})).find("--set data.dataset") !=
        std::string::npos);
  // Bare words stay strings, whatever letter they start with; numbers stay numbers.
  auto ok = resolve_template("t", pipeline, {"dataset=news-2", "steps=7", "lr=1e-3"});
  REQUIRE_MESSAGE(ok.ok(), msg(ok));
  CHECK(ok->stages[0].spec.dataset == "news-2");
  CHECK(ok->stages[0].spec.steps == 7);
  CHECK(msg(resolve_template("t", pipeline, {"dataset=5abc"})) == "ok");
}

// Found by tests/fuzz (fuzz_template, input "#\0dataset=\xe9"): a bare-word
// override that is not UTF-8 was accepted, and the resolved stage config it was
// written into was no longer TOML the trainer could read.
TEST_CASE("an override value that is not valid UTF-8 is refused at resolution naming the key and the byte") {
  auto r = resolve_template("t", "#", {"dataset=\xe9"});
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.err().message.find("--set data.dataset") != std::string::npos);
  CHECK(r.err().message.find("not valid UTF-8: byte 1 is 0xe9") != std::string::npos);
  // Overlong, surrogate and truncated sequences too; well-formed UTF-8 stays a bare word.
  for (const char* bad : {"dataset=\xc0\xae", "dataset=a\xed\xa0\x80", "dataset=ab\xf0\x9f\x98", "dataset=\xf5\x80\x80\x80"})
    CHECK_FALSE(resolve_template("t", pipeline, {bad}).ok());
  auto ok = resolve_template("t", pipeline, {"dataset=caf\xc3\xa9-\xf0\x9f\x98\x80"});
  REQUIRE(ok.ok());
  CHECK(ok->stages[0].spec.dataset == "caf\xc3\xa9-\xf0\x9f\x98\x80");
  for (const auto& st : ok->stages) CHECK(parse_run_config(st.config_toml, "/x/" + st.name + ".toml").ok());
}

TEST_CASE("output.dir is no key of a job: the scheduler names each stage's directory") {
  auto r = resolve_template("t", pipeline, {"text=/d/c.txt", "output.dir=/tmp/elsewhere"});
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().message.find("output.dir is not section.key of a run config section") != std::string::npos);
  CHECK_FALSE(resolve_template("t", "[output]\ndir = \"/tmp/x\"\n", {"text=/d/c.txt"}).ok());
}

TEST_CASE("an override names a path by its key's type: section.key, a stage's, a shortcut") {
  for (const char* k : {"data.text", "text", "sft.text", "sft.data.text", "hpo.validation", "search.hpo.validation",
                        "reward.model", "align.reference", "model.init_from", "data.tokenizer", "shards", "data.prefs"})
    CHECK_MESSAGE(override_names_path(k), k);
  for (const char* k : {"dataset", "data.dataset", "steps", "train.steps", "kind", "sft.kind", "reward.regex", "x"})
    CHECK_FALSE_MESSAGE(override_names_path(k), k);
}

// Found by tests/fuzz (fuzz_template, seed 2026): an override key with a
// quote in it ("hpo.grid_points'x") was written into the stage's config as a
// bare key, and the trainer could not read that config back.
TEST_CASE("an override key that is not a bare word is refused naming it, and every resolved config parses") {
  auto r = resolve_template("t", "#", {"dataset=# &eads = 4", "hpo.grid_pointsOOOOOOOOOtaset=# &eads = 4",
                                        "hpo.grid_pointsOOOOOOOOOOOOOOOOO'OOOOOOOOOOOOOOnethreadst=#y:a&"});
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.err().message.find("hpo.grid_pointsOOOOOOOOOOOOOOOOO'OOOOOOOOOOOOOOnethreadst is not section.key") !=
        std::string::npos);
  for (const char* bad : {"train.st eps=1", "train.st\"eps=1", "train.=1", "train.a#b=1", "train.\xc3\xa9=1"})
    CHECK_FALSE_MESSAGE(resolve_template("t", "#", {bad}).ok(), bad);
  // A value with TOML's comment and quote characters is text, written quoted.
  auto ok = resolve_template("t", "#", {"dataset=# &eads = 4"});
  REQUIRE(ok.ok());
  for (const auto& st : ok->stages) CHECK(parse_run_config(st.config_toml, "/x/" + st.name + ".toml").ok());
}
