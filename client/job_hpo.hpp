// An hpo stage's result as `loom job show` shows it: the typed best trial the
// scheduler fills in (StageInfo.hpo_best, proto/loom/v1/jobs.proto) as one line
// in words and as a JSON object. Nothing here reads job events. Pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace loom::v1 {
class HpoBest;
}

namespace loom::cli {

// "best trial 3 (optim.lr=0.00233): validation loss 2.7251 at step 900,
// checkpoint C; 1800 of a full sweep's 7200 steps (0.250)" — the words of the
// stage's hpo_best event, made from the typed field.
std::string hpo_best_line(const loom::v1::HpoBest& b);

// {"trial": 3, "values": {"optim.lr": "0.00233"}, "validation_loss": 2.7251,
//  "step": 900, "checkpoint": C, "steps_granted": 1800, "sweep_steps": 7200}
nlohmann::json hpo_best_json(const loom::v1::HpoBest& b);

}  // namespace loom::cli
