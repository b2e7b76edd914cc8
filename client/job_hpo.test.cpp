// job_hpo: `loom job show` prints an hpo stage's best trial from the typed
// field the scheduler fills in (StageInfo.hpo_best), never from event text.
#include "client/job_hpo.hpp"

#include "loom/v1/jobs.pb.h"

#include <doctest/doctest.h>

namespace {

loom::v1::HpoBest best_of_two_values() {
  loom::v1::HpoBest b;
  b.set_trial(3);
  auto* lr = b.add_values();
  lr->set_key("optim.lr");
  lr->set_value("0.00233");
  auto* warm = b.add_values();
  warm->set_key("optim.warmup_steps");
  warm->set_value("10");
  b.set_validation_loss(2.72514);
  b.set_step(900);
  b.set_checkpoint("/d/jobs/job-000002/search/trial-3/checkpoints/step-000900");
  b.set_steps_granted(1800);
  b.set_sweep_steps(7200);
  return b;
}

}  // namespace

TEST_CASE("an hpo stage's best trial reads as the hpo_best event's words, made from the typed field") {
  CHECK(loom::cli::hpo_best_line(best_of_two_values()) ==
        "best trial 3 (optim.lr=0.00233 optim.warmup_steps=10): validation loss 2.7251 at step 900, checkpoint "
        "/d/jobs/job-000002/search/trial-3/checkpoints/step-000900; 1800 of a full sweep's 7200 steps (0.250)");
}

TEST_CASE("an hpo stage's best trial is a JSON object with its values by key") {
  const auto j = loom::cli::hpo_best_json(best_of_two_values());
  CHECK(j.at("trial") == 3);
  CHECK(j.at("values").at("optim.lr") == "0.00233");
  CHECK(j.at("values").at("optim.warmup_steps") == "10");
  CHECK(j.at("values").size() == 2);
  CHECK(j.at("validation_loss").get<double>() == doctest::Approx(2.72514));
  CHECK(j.at("step") == 900);
  CHECK(j.at("checkpoint") == "/d/jobs/job-000002/search/trial-3/checkpoints/step-000900");
  CHECK(j.at("steps_granted") == 1800);
  CHECK(j.at("sweep_steps") == 7200);
}
