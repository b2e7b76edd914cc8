// The HPO criterion of issue 15 at CI size: a byte-level tiny GPT on the
// licence texts every Debian machine ships; 8 learning rates, log-uniform.
#include "sim/hpo/local_search.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace loom;
using namespace loom::sim;

namespace {

search_config tiny() {
  search_config c;
  c.model = model::gpt2_config{2, 4, 64, 32, 256, 256};
  c.batch = 8;
  c.seq_len = 32;
  c.warmup = 20;
  c.workers = 4;
  return c;
}

const search_data& data() {
  static const search_data d = [] {
    auto text = licence_corpus();
    REQUIRE_MESSAGE(text.ok(), text.err().message);
    return bytes_split(*text, 0.05);
  }();
  return d;
}

std::vector<hpo::trial_config> lr_trials(int n, std::uint64_t seed) {
  auto space = hpo::search_space::make({hpo::parameter{"optim.lr", hpo::distribution::log_uniform, 1e-4, 3e-2, {}, false}});
  REQUIRE(space.ok());
  return space->sample(n, seed);
}

hpo::trial_config with(std::vector<hpo::assignment> values) { return hpo::trial_config{std::move(values)}; }

}  // namespace

TEST_CASE("ASHA over 8 log-uniform learning rates picks a config within 5% of the sweep's best loss with at most 40% of its steps") {
  const auto trials = lr_trials(8, 11);
  const hpo::asha_options opt{30, 300, 3, true};  // rungs 33, 100, 300
  auto sweep = run_sweep(tiny(), data(), trials, 300, {33, 100});
  auto asha = run_asha(tiny(), data(), trials, opt);
  REQUIRE(sweep.ok());
  REQUIRE(asha.ok());
  for (const auto& t : sweep->trials)
    MESSAGE(t.config.text() << ": loss at 33/100/300 " << t.curve[0].second << " " << t.curve[1].second << " "
                            << t.curve[2].second);
  const double loss_ratio = asha->best_loss / sweep->best_loss;
  const double steps_ratio = double(asha->steps) / double(sweep->steps);
  MESSAGE("sweep best " << trials[std::size_t(sweep->best)].text() << " " << sweep->best_loss << "; ASHA "
                        << trials[std::size_t(asha->best)].text() << " " << asha->best_loss << "; loss_ratio "
                        << loss_ratio << ", steps " << asha->steps << "/" << sweep->steps);
  CHECK(sweep->steps == 8 * 300);
  CHECK(sweep->best_loss < std::log(256.0) * 0.6);  // it learned
  CHECK(asha->best_steps == 300);                   // the pick was trained to R
  CHECK(loss_ratio <= 1.05);
  CHECK(steps_ratio <= 0.40);
  // Continued from its own state at each promotion: the same bits as the sweep's straight run.
  CHECK(asha->best_loss == sweep->trials[std::size_t(asha->best)].val_loss);
  CHECK(asha->best_params.size() == sweep->best_params.size());
}

TEST_CASE("the same trials and seed give the same search, step for step") {
  const auto trials = lr_trials(4, 3);
  const hpo::asha_options opt{10, 90, 3, true};
  auto a = run_asha(tiny(), data(), trials, opt);
  auto b = run_asha(tiny(), data(), trials, opt);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->best == b->best);
  CHECK(a->steps == b->steps);
  CHECK(a->best_loss == b->best_loss);
  CHECK(a->best_params == b->best_params);
  CHECK(a->sim.makespan == b->sim.makespan);
}

TEST_CASE("a trial whose loss blows up is stopped at that step and never picked") {
  std::vector<hpo::trial_config> trials{with({{"optim.lr", 1e-3, false}}),
                                        with({{"optim.lr", 1e6, false}, {"optim.warmup_steps", 0, true},
                                              {"optim.grad_clip", 0, false}})};
  auto r = run_asha(tiny(), data(), trials, hpo::asha_options{10, 30, 3, true});
  REQUIRE(r.ok());
  CHECK(r->best == 0);
  const auto& blown = r->trials[1];
  MESSAGE("lr 1e6: " << blown.steps << " steps, loss " << blown.val_loss);
  CHECK(std::isnan(blown.val_loss));
  CHECK(blown.steps <= 10);
}

TEST_CASE("a trial setting a key the local harness does not vary is refused naming it") {
  auto r = run_asha(tiny(), data(), {with({{"train.seq_len", 16, true}})}, hpo::asha_options{10, 30, 3, true});
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.err().message.find("train.seq_len") != std::string::npos);
  CHECK(run_sweep(tiny(), data(), {}, 30).code() == errc::invalid_argument);
  CHECK(run_asha(tiny(), search_data{}, lr_trials(2, 1), hpo::asha_options{10, 30, 3, true}).code() ==
        errc::invalid_argument);
}
