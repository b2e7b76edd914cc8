// worker_sim: drives an asha search with W workers in virtual time — a job
// of d steps occupies its worker for d time units; the earliest-ending job
// (ties: the lower worker) reports first — while the training itself runs
// one job after another through a callback. What the scheduler does with
// real trainers, reproducibly: the local evaluation harness
// (services/trainer/hpo) and the ASHA tests use it. Pure: no clock, no threads.
#pragma once

#include "libs/hpo/asha.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <functional>

namespace loom::hpo {

// Trains `trial` from step `from` to `to` (its own state continues from
// `from`) and returns its validation loss at `to`; an error ends the search.
using train_fn = std::function<result<double>(int trial, std::int64_t from, std::int64_t to)>;

struct sim_stats {
  std::int64_t steps = 0;     // steps trained in all
  std::int64_t makespan = 0;  // virtual time at which the last job ended
  int jobs = 0;               // train_fn calls
};

// REQUIRES: workers >= 1. Runs until the search is done.
result<sim_stats> run_workers(asha& search, int workers, const train_fn& train);

}  // namespace loom::hpo
