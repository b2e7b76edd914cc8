#include "libs/runspec/run_config.hpp"
#include "libs/runspec/toml_reader.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <optional>

using namespace loom;
using namespace loom::runspec;

namespace {

constexpr const char* base = R"(
[model]
layers = 2
heads = 2
channels = 32
max_seq_len = 16
vocab = 100

[data]
text = "corpus.txt"

[train]
batch = 2
seq_len = 8
steps = 20
seed = 7

[optim]
lr = 1e-3
min_lr = 1e-4
warmup_steps = 2

[output]
dir = "out"
)";

}  // namespace

TEST_CASE("run_config reads every section and resolves relative paths against the file") {
  auto c = parse_run_config(base, "/etc/loom/run.toml");
  REQUIRE(c.ok());
  CHECK(c->model.layers == 2);
  CHECK(c->model.channels == 32);
  CHECK(c->model.padded_vocab == 128);  // rounded up to a multiple of 128 when unset
  CHECK(c->text == "/etc/loom/corpus.txt");
  CHECK(c->out_dir == "/etc/loom/out");
  CHECK(c->batch == 2);
  CHECK(c->steps == 20);
  CHECK(c->seed == 7);
  CHECK(c->lr == doctest::Approx(1e-3));
  CHECK(c->warmup_steps == 2);
  CHECK(c->kind == "lm");
}

TEST_CASE("run_config refuses unknown keys and sections by name and line") {
  std::string t = std::string(base) + "\n[train2]\nx = 1\n";
  auto c = parse_run_config(t, "run.toml");
  REQUIRE(!c.ok());
  CHECK(c.err().message.find("[train2]") != std::string::npos);
  CHECK(c.err().message.find("run.toml:") != std::string::npos);

  std::string typo = std::string(base);
  typo.replace(typo.find("steps = 20"), 10, "stepz = 20");
  c = parse_run_config(typo, "run.toml");
  REQUIRE(!c.ok());
  CHECK(c.err().message.find("train.stepz is not a known key") != std::string::npos);
  CHECK(c.err().message.find("run.toml:") != std::string::npos);
}

TEST_CASE("run_config refuses wrong types, out-of-range values and inconsistent settings") {
  auto with = [](const std::string& from, const std::string& to) {
    std::string t = base;
    t.replace(t.find(from), from.size(), to);
    return parse_run_config(t, "run.toml");
  };
  auto c = with("batch = 2", "batch = \"two\"");
  REQUIRE(!c.ok());
  CHECK(c.err().message.find("train.batch must be an integer") != std::string::npos);
  c = with("batch = 2", "batch = 0");
  REQUIRE(!c.ok());
  CHECK(c.err().message.find("train.batch must be in [1,") != std::string::npos);
  c = with("seq_len = 8", "seq_len = 32");
  REQUIRE(!c.ok());
  CHECK(c.err().message.find("exceeds model.max_seq_len") != std::string::npos);
  c = with("channels = 32", "channels = 33");
  REQUIRE(!c.ok());
  CHECK(c.err().message.find("multiple of heads") != std::string::npos);
  c = with("text = \"corpus.txt\"", "text = \"a\"\nshards = \"b\"");
  REQUIRE(!c.ok());
  CHECK(c.err().message.find("exactly one of data.shards, data.text, data.dataset, data.sft, data.prefs and data.synthetic_prefs") != std::string::npos);
  c = with("lr = 1e-3", "lr = 1e-5");
  REQUIRE(!c.ok());
  CHECK(c.err().message.find("min_lr") != std::string::npos);
  c = parse_run_config("[model\nlayers = 2", "broken.toml");
  REQUIRE(!c.ok());
  CHECK(c.err().message.find("broken.toml:") != std::string::npos);
}

TEST_CASE("run_config overrides are typed TOML values and may add sections") {
  auto c = parse_run_config(base, "run.toml", {"train.steps=300", "optim.lr=0.01", "checkpoint.every_steps=10",
                                               "data.shuffle=false"});
  REQUIRE(c.ok());
  CHECK(c->steps == 300);
  CHECK(c->lr == doctest::Approx(0.01));
  CHECK(c->every_steps == 10);
  CHECK(!c->shuffle);
  auto bad = parse_run_config(base, "run.toml", {"train.steps=many"});
  REQUIRE(!bad.ok());
  CHECK(bad.err().message.find("train.steps must be an integer") != std::string::npos);
  CHECK(bad.err().message.find("--set") != std::string::npos);
  CHECK(!parse_run_config(base, "run.toml", {"steps=3"}).ok());
  CHECK(!parse_run_config(base, "run.toml", {"train.nope=3"}).ok());
}

TEST_CASE("an override's value is the TOML value it spells, else its text as a string") {
  auto value = [](const std::string& t) {
    auto v = override_value(t);
    REQUIRE_MESSAGE(v.ok(), t);
    return std::move(*v);
  };
  auto str = [&](const std::string& t) {
    auto v = value(t);
    return v->is_string() ? std::optional<std::string>(v->as_string()->get()) : std::nullopt;
  };
  CHECK(value("300")->as_integer()->get() == 300);
  CHECK(value(" -1")->as_integer()->get() == -1);
  CHECK(value("+2.5e-3")->as_floating_point()->get() == doctest::Approx(2.5e-3));
  CHECK(std::isinf(value("inf")->as_floating_point()->get()));
  CHECK(std::isnan(value("nan")->as_floating_point()->get()));
  CHECK(value("true")->as_boolean()->get());
  CHECK_FALSE(value("false")->as_boolean()->get());
  CHECK(value("[1, 2]")->as_array()->size() == 2);
  CHECK(str("\"quoted text\"") == "quoted text");
  CHECK(str("'literal'") == "literal");
  // Not TOML values: the text itself, whether or not it starts like one.
  CHECK(str("/usr/share/common-licenses/GPL-3") == "/usr/share/common-licenses/GPL-3");
  CHECK(str("pipeline") == "pipeline");
  CHECK(str("t5-small") == "t5-small");
  CHECK(str("fp16") == "fp16");
  CHECK(str("nano") == "nano");
  CHECK(str("12 monkeys") == "12 monkeys");
  CHECK(str("") == "");
  CHECK(str("  ") == "  ");
}

TEST_CASE("an override that is not exactly one TOML value is refused naming the key, not read as its first value") {
  auto err = [](const std::string& kv) {
    auto c = parse_run_config(base, "run.toml", {kv});
    return c.ok() ? std::string("ok") : c.err().message;
  };
  // Before: "5\nrogue=1" parsed as the document `v = 5` + `rogue = 1`, and train.steps was 5.
  CHECK(err("train.steps=5\nrogue=1") ==
        "--set train.steps: \"5\\nrogue=1\" is not one TOML value: it holds a control character (a value is one "
        "line; write escapes inside a quoted string)");
  CHECK(err("data.text=/a\r") .find("--set data.text: \"/a\\r\" is not one TOML value") == 0);
  CHECK(err("data.text=\"/a\" trailing").find("--set data.text: \"\\\"/a\\\" trailing\" is not one TOML value") == 0);
  CHECK(err("train.steps=[1, 2").find("--set train.steps: \"[1, 2\" is not one TOML value") == 0);
  CHECK(err("kind=lm\nx") .find("--set kind: ") == 0);
  CHECK(err("optim.lr=\t0.002") == "ok");  // a tab is blank space around one value
  CHECK(override_value(std::string("a\0b", 3)).code() == errc::invalid_argument);
  CHECK(quoted_text(std::string(100, 'x'), 10) == "\"xxxxxxxxxx\"... (100 characters)");
}

TEST_CASE("math_hash changes with the numbers, not with checkpoint or output settings") {
  auto a = parse_run_config(base, "run.toml");
  auto b = parse_run_config(base, "run.toml", {"checkpoint.every_steps=5", "output.dir=elsewhere"});
  auto c = parse_run_config(base, "run.toml", {"optim.lr=0.002"});
  auto d = parse_run_config(base, "run.toml", {"train.seed=8"});
  REQUIRE((a.ok() && b.ok() && c.ok() && d.ok()));
  CHECK(a->math_hash() == b->math_hash());
  CHECK(a->math_hash() != c->math_hash());
  CHECK(a->math_hash() != d->math_hash());
  CHECK(a->math_hash().size() == 64);
}

TEST_CASE("wall-time snapshots default to every 10 minutes, and every_minutes is the older spelling of every_seconds") {
  auto dflt = parse_run_config(base, "/cfg/run.toml");
  REQUIRE(dflt.ok());
  CHECK(dflt->every_seconds == doctest::Approx(600));
  auto secs = parse_run_config(std::string(base) + "\n[checkpoint]\nevery_seconds = 90\n", "/cfg/run.toml");
  REQUIRE(secs.ok());
  CHECK(secs->every_seconds == doctest::Approx(90));
  auto mins = parse_run_config(std::string(base) + "\n[checkpoint]\nevery_minutes = 2.5\n", "/cfg/run.toml");
  REQUIRE(mins.ok());
  CHECK(mins->every_seconds == doctest::Approx(150));
  auto off = parse_run_config(std::string(base) + "\n[checkpoint]\nevery_seconds = 0\n", "/cfg/run.toml");
  REQUIRE(off.ok());
  CHECK(off->every_seconds == 0);
  auto both = parse_run_config(std::string(base) + "\n[checkpoint]\nevery_seconds = 60\nevery_minutes = 1\n",
                               "/cfg/run.toml");
  REQUIRE_FALSE(both.ok());
  CHECK(both.err().message.find("both given") != std::string::npos);
  auto neg = parse_run_config(std::string(base) + "\n[checkpoint]\nevery_seconds = -1\n", "/cfg/run.toml");
  REQUIRE_FALSE(neg.ok());
  CHECK(neg.err().message.find("every_seconds") != std::string::npos);
}

TEST_CASE("a diloco stage reads its [diloco] section, runs one trainer per site and refuses bad settings by line") {
  const std::string d = std::string("kind = \"diloco\"\n") + base +
                        "\n[diloco]\nsites = 4\ninner_steps = 8\ncodec = \"int4\"\nfragments = 2\nquorum = 0.75\n"
                        "staleness = 1\nsync_wait_s = 3\n";
  auto c = parse_run_config(d, "run.toml");
  REQUIRE_MESSAGE(c.ok(), c.err().message);
  CHECK(c->kind == "diloco");
  CHECK(c->is_diloco());
  CHECK(c->diloco.sites == 4);
  CHECK(c->diloco.inner_steps == 8);
  CHECK(c->diloco.codec == "int4");
  CHECK(c->diloco.fragments == 2);
  CHECK(c->diloco.quorum == doctest::Approx(0.75));
  CHECK(c->diloco.staleness == 1);
  CHECK(c->diloco.sync_wait_s == doctest::Approx(3));
  CHECK(c->min_trainers == 4);  // the group is the sites, whatever train.grad_accum is
  CHECK(c->max_trainers == 4);
  CHECK(c->math_hash() != parse_run_config(d, "run.toml", {"diloco.inner_steps=16"})->math_hash());

  auto refused = [&](const std::vector<std::string>& set) {
    auto r = parse_run_config(d, "run.toml", set);
    REQUIRE(!r.ok());
    return r.err().message;
  };
  CHECK(refused({"diloco.codec=\"int3\""}).find("diloco.codec must be one of") != std::string::npos);
  CHECK(refused({"diloco.fragments=3"}).find("must not exceed model.layers (2)") != std::string::npos);
  CHECK(refused({"diloco.quorum=1.5"}).find("diloco.quorum must be in [0.01, 1]") != std::string::npos);
  CHECK(refused({"diloco.nope=1"}).find("diloco.nope is not a known key") != std::string::npos);
  // A bad value in the file names its line.
  std::string bad_line = d;
  bad_line.replace(bad_line.find("codec = \"int4\""), 14, "codec = 4");
  auto at = parse_run_config(bad_line, "run.toml");
  REQUIRE(!at.ok());
  CHECK(at.err().message.find("run.toml:") != std::string::npos);
  CHECK(at.err().message.find("diloco.codec must be a string") != std::string::npos);
}

TEST_CASE("diloco.datasets gives every site its own dataset and replaces data.*") {
  std::string d = std::string("kind = \"diloco\"\n") + base + "\n[diloco]\nsites = 2\ninner_steps = 4\n";
  d.replace(d.find("text = \"corpus.txt\""), 19, "");
  auto c = parse_run_config(d, "run.toml", {"diloco.datasets=[\"north\", \"south\"]"});
  REQUIRE_MESSAGE(c.ok(), c.err().message);
  CHECK(c->diloco.datasets == std::vector<std::string>{"north", "south"});
  CHECK(c->dataset == "north");  // site 0's; the trainer of site r takes datasets[r]
  auto both = parse_run_config(d, "run.toml", {"diloco.datasets=[\"north\", \"south\"]", "data.text=x.txt"});
  REQUIRE(!both.ok());
  CHECK(both.err().message.find("leave data.shards") != std::string::npos);
  auto three = parse_run_config(d, "run.toml", {"diloco.datasets=[\"a\", \"b\", \"c\"]"});
  REQUIRE(!three.ok());
  CHECK(three.err().message.find("names 3 datasets for 2 sites: one per site") != std::string::npos);
  // Another kind ignores a [diloco] section (a template's shared sections reach every stage).
  auto lm = parse_run_config(std::string(base) + "\n[diloco]\nsites = 3\n", "run.toml");
  REQUIRE(lm.ok());
  CHECK(lm->min_trainers == 1);
}

TEST_CASE("diloco.sites names edge sites as an array, one member each, and refuses bad names by line") {
  const std::string d = std::string("kind = \"diloco\"\n") + base + "\n[diloco]\nsites = [\"north\", \"south\"]\ninner_steps = 4\n";
  auto c = parse_run_config(d, "run.toml");
  REQUIRE_MESSAGE(c.ok(), c.err().message);
  CHECK(c->diloco.site_names == std::vector<std::string>{"north", "south"});
  CHECK(c->diloco.sites == 2);
  CHECK(c->min_trainers == 2);
  CHECK(c->math_hash() != parse_run_config(d, "run.toml", {"diloco.sites=[\"north\", \"east\"]"})->math_hash());
  auto counted = parse_run_config(d, "run.toml", {"diloco.sites=2"});  // the count form still works
  REQUIRE(counted.ok());
  CHECK(counted->diloco.site_names.empty());
  auto refused = [&](const std::string& set) {
    auto r = parse_run_config(d, "run.toml", {set});
    REQUIRE(!r.ok());
    return r.err().message;
  };
  CHECK(refused("diloco.sites=[\"North\"]").find("must be site names") != std::string::npos);
  CHECK(refused("diloco.sites=[\"a\", \"a\"]").find("names site \"a\" twice") != std::string::npos);
  CHECK(refused("diloco.sites=[]").find("must name 1 to 64 sites") != std::string::npos);
  std::string bad_line = d;
  bad_line.replace(bad_line.find("\"south\""), 7, "\"So/uth\"");
  auto at = parse_run_config(bad_line, "run.toml");
  REQUIRE(!at.ok());
  CHECK(at.err().message.find("run.toml:") != std::string::npos);
}

TEST_CASE("export.max_loss is read, range-checked, and leaves the math hash alone") {
  auto plain = parse_run_config(base, "run.toml");
  auto bar = parse_run_config(base, "run.toml", {"export.max_loss=4.5"});
  REQUIRE(plain.ok());
  REQUIRE(bar.ok());
  CHECK(plain->export_max_loss == 0);
  CHECK(bar->export_max_loss == 4.5);
  CHECK(plain->math_hash() == bar->math_hash());
  auto negative = parse_run_config(base, "run.toml", {"export.max_loss=-1"});
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.err().message.find("export.max_loss must be in [0, 1e+06]") != std::string::npos);
  auto unknown = parse_run_config(base, "run.toml", {"export.min_loss=1"});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.err().message.find("export.min_loss is not a known key") != std::string::npos);
}

namespace {
constexpr const char* dpo_cfg = R"(
kind = "dpo"
[model]
layers = 2
heads = 2
channels = 32
max_seq_len = 32
vocab = 256
padded_vocab = 256
init_from = "/runs/sft/checkpoints"
[data]
prefs = "prefs.jsonl"
held_out = 0.2
tokenizer = "bytes"
[train]
batch = 4
seq_len = 24
[align]
beta = 0.2
loss = "ipo"
[output]
dir = "out"
)";
}  // namespace

TEST_CASE("a dpo config reads preference data and [align], its reference defaulting to init_from") {
  auto c = parse_run_config(dpo_cfg, "/etc/loom/dpo.toml");
  REQUIRE_MESSAGE(c.ok(), c.err().message);
  CHECK(c->kind == "dpo");
  CHECK(c->format == "preference");
  CHECK(c->prefs == "/etc/loom/prefs.jsonl");
  CHECK(c->held_out == doctest::Approx(0.2));
  CHECK(c->tokenizer == "bytes");
  CHECK(c->align.beta == doctest::Approx(0.2f));
  CHECK(c->align.loss == "ipo");
  CHECK(c->align.reference.empty());
  auto other = parse_run_config(dpo_cfg, "/etc/loom/dpo.toml", {"align.beta=0.5"});
  REQUIRE(other.ok());
  CHECK(other->math_hash() != c->math_hash());  // alignment settings change the numbers
}

TEST_CASE("a dpo config without model.init_from is refused: it has no SFT parent") {
  auto c = parse_run_config(dpo_cfg, "/etc/loom/dpo.toml", {"model.init_from=\"\""});
  REQUIRE_FALSE(c.ok());
  CHECK(c.err().message.find("/etc/loom/dpo.toml: a dpo stage starts from an SFT checkpoint") != std::string::npos);
  auto rm = parse_run_config(dpo_cfg, "/etc/loom/dpo.toml", {"model.init_from=\"\"", "kind=rm"});
  CHECK(rm.ok());  // a reward model may start from scratch
}

TEST_CASE("bad [align] and [reward] settings are refused naming the key and the line") {
  auto msg = [](const std::vector<std::string>& o) {
    auto c = parse_run_config(dpo_cfg, "/etc/loom/dpo.toml", o);
    return c.ok() ? std::string("ok") : c.err().message;
  };
  CHECK(msg({"align.loss=\"kto\""}).find("align.loss must be \"dpo\" or \"ipo\", got \"kto\"") != std::string::npos);
  CHECK(msg({"align.bogus=1"}).find("align.bogus is not a known key") != std::string::npos);
  CHECK(msg({"reward.min_len=2"}).find("[reward] is read by rl stages only") != std::string::npos);
  CHECK(msg({"kind=rl"}).find("an rl stage needs one reward") != std::string::npos);
  CHECK(msg({"kind=rl", "reward.keywords=[\"A\"]", "align.samples_per_prompt=3"})
            .find("train.batch 4 (completions per step) must be a multiple of align.samples_per_prompt 3") !=
        std::string::npos);
  CHECK(msg({"kind=rl", "reward.regex=\"([\"", "align.samples_per_prompt=4"}).find("reward.regex") !=
        std::string::npos);
  CHECK(msg({"kind=rl", "reward.keywords=[\"A\"]", "align.samples_per_prompt=4"}) == "ok");
  CHECK(msg({"kind=lm"}).find("data.format \"preference\" is read by the alignment kinds") != std::string::npos);
  auto line = parse_run_config("kind = \"dpo\"\n[align]\nbeta = -1\n", "/x/a.toml");
  REQUIRE_FALSE(line.ok());
  CHECK(line.err().message.find("/x/a.toml:3: align.beta must be in") != std::string::npos);
}

TEST_CASE("train.precision is fp32 by default, bf16 or auto when asked, named when anything else, and hashed when not fp32") {
  const std::string base = "[model]\nlayers = 1\nheads = 1\nchannels = 8\nmax_seq_len = 8\nvocab = 16\n"
                           "[data]\nshards = \"/d\"\n[train]\nseq_len = 8\n[output]\ndir = \"/o\"\n";
  auto plain = parse_run_config(base, "/t/run.toml");
  REQUIRE(plain.ok());
  CHECK(plain->precision == "fp32");
  for (const char* p : {"bf16", "auto"}) {
    auto c = parse_run_config(base, "/t/run.toml", {std::string("train.precision=\"") + p + "\""});
    REQUIRE(c.ok());
    CHECK(c->precision == p);
    CHECK(c->math_hash() != plain->math_hash());  // another path through the numbers
  }
  auto fp32 = parse_run_config(base, "/t/run.toml", {"train.precision=\"fp32\""});
  REQUIRE(fp32.ok());
  CHECK(fp32->math_hash() == plain->math_hash());  // fp32 runs hash as before
  auto bad = parse_run_config(base, "/t/run.toml", {"train.precision=\"fp16\""});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().message.find("train.precision") != std::string::npos);
  CHECK(bad.err().message.find("fp16") != std::string::npos);
}

TEST_CASE("data.local applies to an lm stage over data.dataset, splits batches evenly, and is part of the run's numbers") {
  const std::string ds = "[model]\nlayers = 2\nheads = 2\nchannels = 32\nmax_seq_len = 64\nvocab = 64\n"
                         "[data]\ndataset = \"corpus\"\n[train]\ngrad_accum = 4\n";
  auto plain = parse_run_config(ds, "run.toml");
  auto local = parse_run_config(ds, "run.toml", {"data.local=true"});
  REQUIRE(plain.ok());
  REQUIRE(local.ok());
  CHECK(local->local);
  CHECK(!plain->local);
  CHECK(local->math_hash() != plain->math_hash());  // another stream: a snapshot of one does not resume the other
  auto on_text = parse_run_config(base, "run.toml", {"data.local=true"});
  REQUIRE(!on_text.ok());
  CHECK(on_text.err().message.find("data.local reads the shards of data.dataset") != std::string::npos);
  auto uneven = parse_run_config(ds, "run.toml", {"data.local=true", "parallel.trainers=3", "train.grad_accum=4"});
  REQUIRE(!uneven.ok());
  CHECK(uneven.err().message.find("data.local with 3 trainers needs train.grad_accum a multiple of 3") !=
        std::string::npos);
  CHECK(parse_run_config(ds, "run.toml", {"data.local=true", "parallel.trainers=2"}).ok());
}
