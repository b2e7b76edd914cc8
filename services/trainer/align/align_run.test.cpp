// The alignment kinds through run_training: rm, dpo and rl stages on the
// synthetic preference set (byte tokens) from a tiny checkpoint; each
// snapshots and resumes bitwise (stop + resume, as run.test.cpp simulates a
// kill), the reward head travels in the snapshot, rl refuses a reward model
// that is not an rm checkpoint.
#include "services/trainer/run/training_run.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/runspec/run_config.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"
#include "services/trainer/run/snapshot_io.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <sstream>

using namespace loom;
using namespace loom::trainer;

namespace {

constexpr const char* model_toml =
    "[model]\nlayers = 1\nheads = 2\nchannels = 32\nmax_seq_len = 24\nvocab = 256\npadded_vocab = 256\n";

// A random tiny byte-level model saved as a signed snapshot: the "SFT parent".
std::string make_parent(const std::string& root, const std::string& data_dir) {
  auto cfg = runspec::parse_run_config(std::string(model_toml) + "[data]\ntext = \"x\"\n[train]\nseq_len = 8\n", "/t/p.toml");
  REQUIRE(cfg.ok());
  auto m = engine::gpt2::create(cfg->model, 2, 8);
  REQUIRE(m.ok());
  m->init_random(3);
  engine::adamw opt(m->params().size(), {}, m->layout().ranges());
  auto key = checkpoint_key(data_dir);
  REQUIRE(key.ok());
  train_state st;
  st.step = 1;
  REQUIRE(save_snapshot(root, *m, opt, st, *key, 1).ok());
  return root;
}

runspec::run_config align_config(const std::string& kind, const std::string& parent, const std::string& out,
                                 std::vector<std::string> extra = {}) {
  std::string toml = std::string("kind = \"") + kind + "\"\n" + model_toml +
                     (parent.empty() ? "" : "init_from = \"" + parent + "\"\n") +
                     "[data]\nsynthetic_prefs = true\ntokenizer = \"bytes\"\nheld_out = 0.05\n"
                     "[train]\nbatch = 4\nseq_len = 24\nsteps = 6\nseed = 9\nthreads = 1\n"
                     "[optim]\nlr = 0.003\nmin_lr = 0.0003\nwarmup_steps = 1\n"
                     "[checkpoint]\nevery_steps = 2\nkeep = 10\n"
                     "[output]\ndir = \"" + out + "\"\n";
  auto c = runspec::parse_run_config(toml, "/t/align.toml", extra);
  REQUIRE_MESSAGE(c.ok(), c.err().message);
  return *c;
}

// metrics.jsonl without its timing fields.
std::vector<std::string> lines(const std::string& out) {
  std::ifstream in(out + "/metrics.jsonl");
  std::vector<std::string> v;
  for (std::string l; std::getline(in, l);) {
    const auto t = l.find(",\"tokens_per_s\""), e = l.find(",\"ms_per_step\"");
    v.push_back(l.substr(0, t) + l.substr(l.find(',', e + 1)));
  }
  return v;
}

std::string bytes_of(const std::string& path) {
  auto t = files::read_file(path);
  return t ? *t : std::string("<missing " + path + ">");
}

// Runs `c` uninterrupted in out_a and, in out_b, stopped after step 1 and
// step 3 and resumed each time; both must end bitwise equal.
void check_resume_bitwise(const std::string& kind, const std::string& parent, const std::string& tmp,
                          const run_options& o, std::vector<std::string> extra = {}) {
  const std::string a = tmp + "/" + kind + "-a", b = tmp + "/" + kind + "-b";
  auto full = run_training(align_config(kind, parent, a, extra), o);
  REQUIRE_MESSAGE(full.ok(), full.err().message);
  CHECK(full->steps == 6);
  CHECK_FALSE(full->eval.empty());
  CHECK(files::read_file(a + "/eval.json").ok());
  std::atomic<bool> stop{true};
  run_options ob = o;
  ob.stop = &stop;
  ob.interrupt_grace = std::chrono::hours(1);  // stops land between steps, however slow a step is here
  auto b1 = run_training(align_config(kind, parent, b, extra), ob);
  REQUIRE_MESSAGE(b1.ok(), b1.err().message);
  CHECK(b1->stopped);
  CHECK(b1->steps == 1);
  ob.resume = true;
  int seen = 0;
  ob.on_step = [&](const step_record&) {
    if (++seen == 2) stop = true;  // stop again at step 3
  };
  stop = false;
  auto b2 = run_training(align_config(kind, parent, b, extra), ob);
  REQUIRE_MESSAGE(b2.ok(), b2.err().message);
  CHECK(b2->first_step == 1);
  CHECK(b2->steps == 3);
  { std::ofstream(b + "/metrics.jsonl", std::ios::app) << "{\"step\":4,\"loss\":1.0,\"lr\""; }  // a torn line
  ob.on_step = {};
  stop = false;
  auto b3 = run_training(align_config(kind, parent, b, extra), ob);
  REQUIRE_MESSAGE(b3.ok(), b3.err().message);
  CHECK(b3->first_step == 3);
  CHECK(b3->steps == 6);
  CHECK(b3->params_sha256 == full->params_sha256);
  CHECK(lines(b) == lines(a));
  CHECK(b3->eval == full->eval);
}

}  // namespace

TEST_CASE("an rm stage trains a reward head beside the backbone, keeps it in each snapshot, and resumes bitwise") {
  files::temp_dir tmp("loom-align-rm");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  const std::string parent = make_parent(tmp.path() + "/sft/checkpoints", o.data_dir);
  check_resume_bitwise("rm", parent, tmp.path(), o);
  const std::string a = tmp.path() + "/rm-a/checkpoints/" + ckpt::step_dir_name(6) + "/reward_head.safetensors";
  CHECK(bytes_of(a).size() > 32 * 4);
  CHECK(bytes_of(a) == bytes_of(tmp.path() + "/rm-b/checkpoints/" + ckpt::step_dir_name(6) + "/reward_head.safetensors"));
  const auto l = lines(tmp.path() + "/rm-a");
  REQUIRE(l.size() == 6);
  CHECK(l[0].find("\"accuracy\":") != std::string::npos);
  CHECK(l[0].find("\"margin\":") != std::string::npos);
  const std::string eval = bytes_of(tmp.path() + "/rm-a/eval.json");
  CHECK(eval.find("\"before\"") != std::string::npos);
  CHECK(eval.find("\"accuracy\"") != std::string::npos);
}

TEST_CASE("a dpo stage trains a policy against a frozen reference from init_from and resumes bitwise") {
  files::temp_dir tmp("loom-align-dpo");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  const std::string parent = make_parent(tmp.path() + "/sft/checkpoints", o.data_dir);
  check_resume_bitwise("dpo", parent, tmp.path(), o, {"align.eval_every=3"});
  const auto l = lines(tmp.path() + "/dpo-a");
  REQUIRE(l.size() == 6);
  CHECK(l[0].find("\"reward_margin\":") != std::string::npos);
  CHECK(l[2].find("\"eval_accuracy\":") != std::string::npos);  // align.eval_every = 3
  CHECK(l[2].find("\"eval_kl\":") != std::string::npos);
  bool has_kl = false;
  auto full = run_training(align_config("dpo", parent, tmp.path() + "/dpo-c"), o);
  REQUIRE(full.ok());
  for (const auto& [k, v] : full->eval)
    if (k == "kl") has_kl = v > 0;  // the policy moved away from the reference
  CHECK(has_kl);
}

TEST_CASE("an rl stage with a rule reward resumes bitwise, and with a reward model it needs an rm checkpoint") {
  files::temp_dir tmp("loom-align-rl");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  const std::string parent = make_parent(tmp.path() + "/sft/checkpoints", o.data_dir);
  const std::vector<std::string> rule = {"align.samples_per_prompt=2", "align.max_new_tokens=6",
                                         "reward.regex=\"[A-Z]+!\"", "reward.max_len=8"};
  check_resume_bitwise("rl", parent, tmp.path(), o, rule);
  CHECK(lines(tmp.path() + "/rl-a")[0].find("\"mean_reward\":") != std::string::npos);

  auto not_rm = run_training(align_config("rl", parent, tmp.path() + "/rl-x",
                                          {"align.samples_per_prompt=2", "align.max_new_tokens=6",
                                           "reward.model=\"" + parent + "\""}),
                             o);
  REQUIRE_FALSE(not_rm.ok());
  CHECK(not_rm.code() == errc::invalid_argument);
  CHECK(not_rm.err().message.find("is not a reward-model checkpoint") != std::string::npos);

  auto rm = run_training(align_config("rm", parent, tmp.path() + "/rm", {"train.steps=2"}), o);
  REQUIRE(rm.ok());
  auto with_rm = run_training(align_config("rl", parent, tmp.path() + "/rl-rm",
                                           {"align.samples_per_prompt=2", "align.max_new_tokens=6", "train.steps=2",
                                            "reward.model=\"" + tmp.path() + "/rm/checkpoints\""}),
                              o);
  REQUIRE_MESSAGE(with_rm.ok(), with_rm.err().message);
  CHECK(with_rm->steps == 2);
}
