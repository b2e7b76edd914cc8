#include "libs/hpo/hpo_spec.hpp"
#include "libs/hpo/search_space.hpp"
#include "libs/runspec/run_config.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace loom;
using namespace loom::hpo;

namespace {

const char* const example = R"(
[hpo]
trials = 8
seed = 5
min_steps = 30
max_steps = 300

[hpo.space]
"optim.lr" = {log_uniform = [1e-4, 1e-2]}
"optim.warmup_steps" = {choice = [0, 10, 50]}
optim.weight_decay = {uniform = [0.0, 0.2]}
"train.batch" = {int = [4, 16]}
)";

std::string error_of(const std::string& toml) {
  auto s = parse_hpo(toml, "job.toml");
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == errc::invalid_argument);
  return s.err().message;
}

std::string with_space(const std::string& lines) {
  return "[hpo]\nmin_steps = 10\nmax_steps = 90\n[hpo.space]\n" + lines + "\n";
}

}  // namespace

TEST_CASE("an hpo table with quoted and dotted keys reads into four parameters with their distributions") {
  auto s = parse_hpo(example, "job.toml");
  REQUIRE(s.ok());
  CHECK(s->trials == 8);
  CHECK(s->seed == 5);
  CHECK(s->asha.min_steps == 30);
  CHECK(s->asha.max_steps == 300);
  CHECK(s->asha.eta == 3);
  const auto& p = s->space.parameters();
  REQUIRE(p.size() == 4);
  std::set<std::string> keys;
  for (const auto& x : p) keys.insert(x.key);
  CHECK(keys == std::set<std::string>{"optim.lr", "optim.warmup_steps", "optim.weight_decay", "train.batch"});
  for (const auto& x : p) {
    if (x.key == "optim.lr") CHECK((x.dist == distribution::log_uniform && x.lo == 1e-4 && x.hi == 1e-2));
    if (x.key == "optim.warmup_steps") CHECK((x.dist == distribution::choice && x.values == std::vector<double>{0, 10, 50} && x.integer));
    if (x.key == "train.batch") CHECK((x.dist == distribution::int_range && x.integer));
  }
}

TEST_CASE("sampled trials are the same for a seed, different for another, and inside their ranges") {
  auto s = parse_hpo(example, "job.toml");
  REQUIRE(s.ok());
  auto a = s->space.sample(200, 5), b = s->space.sample(200, 5), c = s->space.sample(200, 6);
  CHECK(a.size() == 200);
  std::vector<std::string> ta, tb, tc;
  for (std::size_t i = 0; i < a.size(); ++i) ta.push_back(a[i].text()), tb.push_back(b[i].text()), tc.push_back(c[i].text());
  CHECK(ta == tb);
  CHECK(ta != tc);
  int below_mid = 0;
  std::set<double> warmups, batches;
  for (const auto& t : a) {
    const double lr = *t.number("optim.lr");
    CHECK(lr >= 1e-4);
    CHECK(lr <= 1e-2);
    below_mid += lr < 1e-3;  // the geometric middle: half the mass when log-uniform
    warmups.insert(*t.number("optim.warmup_steps"));
    const double batch = *t.number("train.batch");
    CHECK(batch == std::round(batch));
    batches.insert(batch);
    CHECK(*t.number("optim.weight_decay") <= 0.2);
  }
  CHECK(below_mid > 70);
  CHECK(below_mid < 130);
  CHECK(warmups == std::set<double>{0, 10, 50});
  CHECK(*batches.begin() == 4);
  CHECK(*batches.rbegin() == 16);
}

TEST_CASE("a trial's overrides are read by the run spec as the values the trial holds") {
  auto s = parse_hpo(example, "job.toml");
  REQUIRE(s.ok());
  const char* stage = "[model]\nlayers = 2\nheads = 4\nchannels = 64\nmax_seq_len = 32\nvocab = 256\n"
                      "[data]\ntext = \"corpus.txt\"\n[train]\nseq_len = 32\n[optim]\nmin_lr = 0.0\n";
  for (const trial_config& t : s->space.sample(8, 3)) {
    auto rc = runspec::parse_run_config(stage, "stage.toml", t.overrides());
    REQUIRE_MESSAGE(rc.ok(), t.text() << ": " << rc.err().message);
    CHECK(rc->lr == float(*t.number("optim.lr")));
    CHECK(rc->warmup_steps == int(*t.number("optim.warmup_steps")));
    CHECK(rc->batch == int(*t.number("train.batch")));
    CHECK(rc->adam.weight_decay == float(*t.number("optim.weight_decay")));
  }
}

TEST_CASE("a grid takes every combination with log-spaced reals, the last key fastest") {
  auto s = parse_hpo("[hpo]\nmethod = \"grid\"\ngrid_points = 3\nmin_steps = 10\n[hpo.space]\n"
                     "\"optim.lr\" = {log_uniform = [1e-4, 1e-2]}\n\"optim.warmup_steps\" = {choice = [0, 20]}\n",
                     "job.toml");
  REQUIRE(s.ok());
  auto g = s->trial_configs();
  REQUIRE(g.ok());
  REQUIRE(g->size() == 6);
  CHECK((*g)[0].text() == "optim.lr=0.0001 optim.warmup_steps=0");
  CHECK((*g)[1].text() == "optim.lr=0.0001 optim.warmup_steps=20");
  CHECK((*g)[2].text() == "optim.lr=0.001 optim.warmup_steps=0");
  CHECK((*g)[5].text() == "optim.lr=0.01 optim.warmup_steps=20");
  auto wide = search_space::make({parameter{"train.batch", distribution::int_range, 1, 1000, {}, false}});
  REQUIRE(wide.ok());
  auto w = wide->grid(5);
  REQUIRE(w.ok());
  CHECK(w->size() == 5);
  CHECK(w->back().text() == "train.batch=1000");
  CHECK(wide->grid(1).code() == errc::invalid_argument);
  CHECK(wide->grid(5, 4).code() == errc::invalid_argument);
}

TEST_CASE("a bad search space is refused naming the key, the file and the line") {
  std::string m = error_of(with_space("\"train.lr\" = {log_uniform = [1e-4, 1e-2]}"));
  CHECK(m.find("job.toml:5") != std::string::npos);
  CHECK(m.find("train.lr") != std::string::npos);
  CHECK(m.find("optim.lr") != std::string::npos);  // the known keys are listed
  CHECK(error_of(with_space("\"train.steps\" = {int = [10, 100]}")).find("resource") != std::string::npos);
  CHECK(error_of(with_space("\"optim.lr\" = {log_uniform = [0.0, 1e-2]}")).find("lo > 0") != std::string::npos);
  CHECK(error_of(with_space("\"optim.lr\" = {uniform = [1e-2, 1e-4]}")).find("lo < hi") != std::string::npos);
  CHECK(error_of(with_space("\"optim.lr\" = {loguniform = [1e-4, 1e-2]}")).find("unknown distribution") != std::string::npos);
  CHECK(error_of(with_space("\"optim.lr\" = {uniform = [1e-4, 1e-2], choice = [1]}")).find("exactly one") != std::string::npos);
  CHECK(error_of(with_space("\"optim.lr\" = {uniform = [1e-4]}")).find("[lo, hi]") != std::string::npos);
  CHECK(error_of(with_space("\"optim.lr\" = {choice = []}")).find("at least one") != std::string::npos);
  CHECK(error_of(with_space("\"optim.lr\" = {choice = [\"fast\"]}")).find("numbers") != std::string::npos);
  CHECK(error_of(with_space("\"train.batch\" = {uniform = [4, 16]}")).find("takes integers") != std::string::npos);
  CHECK(error_of(with_space("\"train.batch\" = {choice = [4, 8.5]}")).find("takes integers") != std::string::npos);
  CHECK(error_of(with_space("\"optim.lr\" = 0.001")).find("must be a table") != std::string::npos);
  CHECK(error_of("[hpo]\nmin_steps = 10\n").find("[hpo.space]") != std::string::npos);
  CHECK(error_of(with_space("") + "").find("missing or empty") != std::string::npos);
}

TEST_CASE("a bad hpo table is refused naming the key") {
  const std::string space = "[hpo.space]\n\"optim.lr\" = {log_uniform = [1e-4, 1e-2]}\n";
  CHECK(error_of("[hpo]\nmin_steps = 10\ntrails = 8\n" + space).find("hpo.trails is not a known key") != std::string::npos);
  CHECK(error_of("[hpo]\nmin_steps = 10\nmethod = \"bayes\"\n" + space).find("hpo.method") != std::string::npos);
  CHECK(error_of("[hpo]\nmin_steps = 10\ntrials = 0\n" + space).find("hpo.trials") != std::string::npos);
  // A cap with its reason: 10000 trials is a typo, not a search.
  const std::string many = error_of("[hpo]\nmin_steps = 10\ntrials = 10000\n" + space);
  CHECK(many.find("hpo.trials must be an integer in [1, 1000] (each trial is checked at submit") != std::string::npos);
  CHECK(parse_hpo("[hpo]\nmin_steps = 10\ntrials = 1000\n" + space, "job.toml").ok());
  CHECK(error_of("[hpo]\nmin_steps = 10\neta = 1\n" + space).find("hpo.eta") != std::string::npos);
  CHECK(error_of("[hpo]\nmin_steps = 100\nmax_steps = 50\n" + space).find("hpo.max_steps") != std::string::npos);
  CHECK(error_of("[hpo]\nmax_steps = 50\n" + space).find("hpo.min_steps is required") != std::string::npos);
  CHECK(error_of("[hpo]\nmethod = \"grid\"\ntrials = 4\nmin_steps = 10\n" + space).find("hpo.trials") != std::string::npos);
  CHECK(error_of("[hpo\nmin_steps = 10\n").find("job.toml:1") != std::string::npos);
  CHECK(error_of("[stage]\nx = 1\n").find("no [hpo] table") != std::string::npos);
}
