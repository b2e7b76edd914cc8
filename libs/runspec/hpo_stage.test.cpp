// An hpo stage in a job template: its search is read at submit with the
// template's lines in errors, and each trial is an lm run config.
#include "libs/runspec/hpo_stage.hpp"
#include "libs/runspec/job_template.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

using namespace loom;
using namespace loom::runspec;

namespace {

// A one-stage search; `hpo` replaces the [hpo] table's body, `space` [hpo.space]'s.
std::string search(const std::string& hpo = "trials = 4\nseed = 3\nmin_steps = 10\nmax_steps = 90\n",
                   const std::string& space = "\"optim.lr\" = {log_uniform = [1e-4, 1e-2]}\n") {
  return "kind = \"hpo\"\n"                       // line 1
         "[job]\nstages = [\"search\"]\n"         // 2-3
         "[model]\nlayers = 2\nheads = 2\nchannels = 32\nmax_seq_len = 32\nvocab = 256\npadded_vocab = 256\n"  // 4-10
         "[data]\ntokenizer = \"bytes\"\n"        // 11-12
         "[train]\nsteps = 90\nbatch = 4\nseq_len = 16\n"  // 13-16
         "[optim]\nmin_lr = 1e-5\n"               // 17-18
         "[hpo]\n" + hpo +                        // 19-
         "[hpo.space]\n" + space;
}

std::string msg(const result<job_plan>& r) { return r.ok() ? std::string("ok") : r.err().message; }

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

TEST_CASE("the hpo-lr-tiny template resolves to a search of 8 learning rates, each trial an lm run to R") {
  const std::string text = slurp(LOOM_SOURCE_DIR "/templates/hpo-lr-tiny.toml");
  auto plan = resolve_template("hpo-lr-tiny", text, {"text=/data/c.txt"});
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? std::string() : plan.err().message));
  REQUIRE(plan->stages.size() == 1);
  const stage_plan& st = plan->stages[0];
  CHECK(st.spec.kind == "hpo");
  auto search = read_hpo_stage(st.config_toml, "x", st.spec);
  REQUIRE_MESSAGE(search.ok(), (search.ok() ? std::string() : search.err().message));
  CHECK(search->trials.size() == 8);
  CHECK(search->spec.asha.min_steps == 100);
  CHECK(search->spec.asha.max_steps == 900);
  auto trial = trial_config_toml(st.config_toml, *search, 5);
  REQUIRE_MESSAGE(trial.ok(), (trial.ok() ? std::string() : trial.err().message));
  auto cfg = parse_run_config(*trial, "trial");
  REQUIRE_MESSAGE(cfg.ok(), (cfg.ok() ? std::string() : cfg.err().message));
  CHECK(cfg->kind == "lm");
  CHECK(cfg->steps == 900);
  CHECK(cfg->tokenizer == "bytes");
  CHECK(double(cfg->lr) == doctest::Approx(*search->trials[5].number("optim.lr")).epsilon(1e-6));
  CHECK(trial->find("[hpo") == std::string::npos);
}

TEST_CASE("an hpo stage's search is changed by --set like any section, and max_steps defaults to train.steps") {
  auto plan = resolve_template("s", search("trials = 4\nmin_steps = 10\n"), {"text=/d/c.txt", "hpo.trials=2"});
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? std::string() : plan.err().message));
  auto s = read_hpo_stage(plan->stages[0].config_toml, "x", plan->stages[0].spec);
  REQUIRE(s.ok());
  CHECK(s->trials.size() == 2);
  CHECK(s->spec.asha.max_steps == 90);
}

TEST_CASE("a bad hpo section is refused at submit naming the template's file and line") {
  // [hpo] starts on line 19, so its first key is on line 20.
  CHECK(msg(resolve_template("s", search("trials = 4\nbudget = 3\nmin_steps = 10\n"), {"text=/d/c.txt"}))
            .find("s.toml:21: hpo.budget is not a known key") != std::string::npos);
  CHECK(msg(resolve_template("s", search("trials = 0\nmin_steps = 10\n"), {"text=/d/c.txt"}))
            .find("s.toml:20: hpo.trials must be an integer in [1, 1000]") != std::string::npos);
  CHECK(msg(resolve_template("s", search(), {"text=/d/c.txt"})) == "ok");
  const std::string inverted = msg(resolve_template(
      "s", search("min_steps = 10\n", "\"optim.lr\" = {log_uniform = [1e-2, 1e-4]}\n"), {"text=/d/c.txt"}));
  CHECK(inverted.find("s.toml:22:") != std::string::npos);
  CHECK(inverted.find("optim.lr") != std::string::npos);
  const std::string empty = msg(resolve_template(
      "s", search("min_steps = 10\n", "\"optim.weight_decay\" = {uniform = [0.1, 0.1]}\n"), {"text=/d/c.txt"}));
  CHECK(empty.find("s.toml:22:") != std::string::npos);
  CHECK(msg(resolve_template("s", search("min_steps = 10\n", "\"model.layers\" = {int = [1, 4]}\n"), {"text=/d/c.txt"}))
            .find("s.toml:22:") != std::string::npos);
  CHECK(msg(resolve_template("s", search("min_steps = 100\nmax_steps = 50\n"), {"text=/d/c.txt"}))
            .find("hpo.max_steps must be at least hpo.min_steps") != std::string::npos);
  CHECK(msg(resolve_template("s", search("min_steps = 10\n", ""), {"text=/d/c.txt"}))
            .find("[hpo.space] is missing or empty") != std::string::npos);
  CHECK(msg(resolve_template("s", search("min_steps = 10\nvalidation = \"held.txt\"\n"), {"text=/d/c.txt"}))
            .find("hpo.validation held.txt must be an absolute path") != std::string::npos);
  // A trial whose values make a config the trainer would refuse: refused at submit, naming the trial.
  CHECK(msg(resolve_template("s", search("min_steps = 10\n", "\"train.batch\" = {int = [0, 4]}\n"), {"text=/d/c.txt"}))
            .find("train.batch") != std::string::npos);
  // Not an lm search: an hpo stage trains pretraining trials.
  CHECK(msg(resolve_template("s", search(), {"text=/d/c.txt", "data.format=sft"})).find("data.format") !=
        std::string::npos);
}

TEST_CASE("a stage after a search is refused at submit when some trial's values would make its config invalid") {
  std::string two = search("min_steps = 10\n", "\"train.batch\" = {choice = [4, 6]}\n");
  two.replace(two.find("stages = [\"search\"]"), 19, "stages = [\"search\", \"rl\"]");
  two.replace(0, 13, "");  // kind = "hpo" for the search stage only
  two += "[stage.search]\nkind = \"hpo\"\n[stage.rl]\nkind = \"rl\"\n\"data.synthetic_prefs\" = true\n"
         "\"align.samples_per_prompt\" = 4\n\"reward.keywords\" = [\"a\"]\n";
  const std::string m = msg(resolve_template("s", two, {"text=/d/c.txt"}));
  CHECK(m.find("stage rl runs with the best values of hpo stage search") != std::string::npos);
  CHECK(m.find("train.batch=6") != std::string::npos);
  CHECK(msg(resolve_template("s", two, {"text=/d/c.txt", "rl.align.samples_per_prompt=2"})) == "ok");
}

TEST_CASE("the stage after a search takes the best values as overrides of its own config") {
  auto out = with_overrides("[optim]\nlr = 0.1\n[train]\nsteps = 5\n", {"optim.lr=0.00233", "train.batch=16"});
  REQUIRE(out.ok());
  auto c = parse_run_config(*out + "[data]\ntext = \"/d/c.txt\"\n", "x");
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? std::string() : c.err().message));
  CHECK(double(c->lr) == doctest::Approx(0.00233));
  CHECK(c->batch == 16);
  CHECK(c->steps == 5);
  CHECK(!with_overrides("[optim]\nlr = 0.1\n", {"nonsense"}).ok());
}

TEST_CASE("an hpo stage is sized by the trial that needs the most memory and counts its full sweep's steps") {
  auto plan = resolve_template("s", search("trials = 6\nseed = 3\nmin_steps = 10\nmax_steps = 90\n",
                                           "\"train.batch\" = {int = [4, 65536]}\n"),
                               {"text=/d/c.txt"});
  REQUIRE_MESSAGE(plan.ok(), msg(plan));
  const stage_plan& st = plan->stages[0];
  auto s = read_hpo_stage(st.config_toml, "x", st.spec);
  REQUIRE(s.ok());
  double most = 0;
  std::size_t at = 0;
  for (std::size_t t = 0; t < s->trials.size(); ++t)
    if (*s->trials[t].number("train.batch") > most) most = *s->trials[t].number("train.batch"), at = t;
  CHECK(st.spec.batch == 4);  // the stage's own value, which no trial runs with
  CHECK(st.sizing.batch == int(most));
  CHECK(st.sizing.memory().total() > st.spec.memory().total());
  CHECK(st.sizing_what == "trial " + std::to_string(at) + " (" + s->trials[at].text() + ")");
  CHECK(st.total_steps == 6 * 90);  // the sweep: what its step (steps granted) counts towards
}

TEST_CASE("the stage after a search is sized by the trial values that need the most memory") {
  std::string two = search("min_steps = 10\n", "\"train.batch\" = {choice = [4, 512]}\n");
  two.replace(two.find("stages = [\"search\"]"), 19, "stages = [\"search\", \"more\"]");
  two.replace(0, 13, "");
  two += "[stage.search]\nkind = \"hpo\"\n";
  auto plan = resolve_template("s", two, {"text=/d/c.txt"});
  REQUIRE_MESSAGE(plan.ok(), msg(plan));
  const stage_plan& more = plan->stages[1];
  CHECK(more.spec.batch == 4);
  CHECK(more.sizing.batch == 512);
  CHECK(more.sizing_what.find("with the values of hpo stage search's trial") == 0);
  CHECK(more.total_steps == 90);
}
