// wire: the trainer's protobuf <-> internal mapping, the only trainer file
// besides the logic's handler table that sees loom.v1 messages: an assignment
// into the stage the worker runs, the worker's state into its PollWork, and
// the work board's view into TrainerStatus. Pure functions.
#pragma once

#include "libs/collective/ring.hpp"
#include "services/trainer/work_state.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::v1 {
class Assignment;
class PollWorkRequest;
class TrainerStatusReply;
}  // namespace loom::v1

namespace loom::trainer {

// One stage as the scheduler assigned it.
struct assigned_stage {
  std::string job, stage, config_toml, out_dir, init_from;
  std::string tenant;  // the job's: TrainerStatus shows it to this tenant; whose data.dataset is fetched ("" = default)
  std::uint32_t attempt = 0;
  std::uint32_t rank = 0, world = 1;
  std::uint64_t generation = 0;
  std::vector<collective::member> peers;  // by rank
  std::uint64_t stop_at = 0;  // an hpo trial's rung: score and end at this step (0: none)
  std::string eval_text;      // its held-out text ("" = the tail of data.text)
  std::string aggregation_grant;  // a diloco stage: its loom.v1.AggregationGrant, serialized (diloco_stage.hpp)
};

// Something the job's log and audit trail must show (rollback, snapshot_fallback).
struct stage_notice {
  std::uint64_t seq = 0;  // unix ns at creation: unique and rising across restarts
  std::string kind, text;
};

assigned_stage from_wire(const loom::v1::Assignment& a);

// What a trainer tells the scheduler in each poll: `report` (work_state::report),
// and while it holds a stage its progress and the notices not yet acknowledged.
struct poll_facts {
  std::string node, report;
  const work_view* holding = nullptr;  // null: idle
  std::vector<stage_notice> notices;
  std::string inbox_endpoint, inbox_key;  // its collective inbox ("" when it has none)
  struct pressure_facts {
    std::string level = "ok", why;
    double memory = -1, cpu = -1;
  };
  pressure_facts pressure;  // load_shedder::facts()
};
void to_wire(const poll_facts& f, loom::v1::PollWorkRequest* out);

void to_wire(const work_view& v, loom::v1::TrainerStatusReply* out);

}  // namespace loom::trainer
