// See job_hpo.hpp: an hpo stage's typed best trial, in words and as JSON.
#include "client/job_hpo.hpp"

#include "loom/v1/jobs.pb.h"

#include <cstdio>

namespace loom::cli {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string hpo_best_line(const loom::v1::HpoBest& b) {
  std::string values;
  for (const auto& v : b.values()) values += (values.empty() ? "" : " ") + v.key() + "=" + v.value();
  const double spent = b.sweep_steps() ? double(b.steps_granted()) / double(b.sweep_steps()) : 0.0;
  return "best trial " + std::to_string(b.trial()) + " (" + values + "): validation loss " +
         fixed(b.validation_loss(), 4) + " at step " + std::to_string(b.step()) + ", checkpoint " + b.checkpoint() +
         "; " + std::to_string(b.steps_granted()) + " of a full sweep's " + std::to_string(b.sweep_steps()) +
         " steps (" + fixed(spent, 3) + ")";
}

nlohmann::json hpo_best_json(const loom::v1::HpoBest& b) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& v : b.values()) values[v.key()] = v.value();
  return {{"trial", b.trial()},
          {"values", values},
          {"validation_loss", b.validation_loss()},
          {"step", b.step()},
          {"checkpoint", b.checkpoint()},
          {"steps_granted", b.steps_granted()},
          {"sweep_steps", b.sweep_steps()}};
}

}  // namespace loom::cli
