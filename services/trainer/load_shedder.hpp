// load_shedder: the trainer service's side of load shedding (issue 30, item 3).
// The poll loop reads the machine's pressure once a second (observe); the
// training thread asks before every step whether to lower its micro-batch
// (shed_reason, run_options::shed), and the poll tells the scheduler the
// level (facts), which pauses the lowest-priority work of pressed nodes once
// the pressure is sustained. Thread-safe: one mutex.
//
//   reading ─▶ pressure_gauge ─▶ ok | high | sustained
//                                   high: the run halves its micro-batch, at most once
//                                         per fresh reading (the last shed must show first)
//                                   sustained: the scheduler pauses work (job event, audit)
#pragma once

#include "libs/runtime/pressure.hpp"
#include "services/trainer/wire.hpp"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace loom::trainer {

class load_shedder {
 public:
  using clock = runtime::pressure_gauge::clock;
  load_shedder(runtime::shed_settings s, runtime::pressure_paths where);

  // One reading now; `running`: a stage's step loop runs here. A failed
  // reading (an unreadable /proc, a malformed injection file) keeps the last
  // level and is returned once per distinct message (the caller logs it).
  std::string observe(bool running, clock::time_point now);
  // Asked before each step: why to lower the micro-batch now ("" = not now).
  std::string shed_reason();
  poll_facts::pressure_facts facts() const;

 private:
  mutable std::mutex mu_;
  runtime::pressure_gauge gauge_;
  runtime::pressure_paths where_;
  std::uint64_t readings_ = 0;      // readings taken
  std::uint64_t shed_after_ = 0;    // shed again only once a reading newer than this one is high
  std::string last_error_;
};

}  // namespace loom::trainer
