// admission: what the scheduler checks of a resolved job before it stores it,
// against the trainers it knows, and — for a stage still queued — why it waits.
// Pure: the caller passes the zone's trainers as plain values.
//
//   zone      known (the scheduler's own, or one some registered node is in)
//   memory    one member's estimate (libs/model/memory.hpp) fits the usable
//             memory of some live trainer of the zone
//   threads   train.threads is at most the cores of some live trainer of the zone
// (A gang larger than the zone's trainers is taken: more may start; it waits
// and says so.)
// With no trainer registered yet in the zone (a deployment that is starting)
// only the zone is checked; placement checks memory, the trainer threads.
#pragma once

#include "libs/runspec/job_template.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace loom::scheduler {

// A trainer as admission sees it.
struct trainer_view {
  std::string id, zone;
  std::uint32_t cores = 0;
  std::uint64_t memory_bytes = 0;  // physical memory it reported
  bool live = true, draining = false;
  std::string running;  // "job-000002/pretrain" when it holds a stage
};

// The share of a node's physical memory one stage may plan for: the rest is
// the operating system's and the other services' on the same host.
std::uint64_t usable_memory(std::uint64_t physical_bytes);

// invalid_argument naming the stage and the figures (estimate and the largest
// trainer's memory, threads and cores, ...); not_found for an unknown zone.
status admit(const runspec::job_plan& plan, const std::string& zone, const std::set<std::string>& known_zones,
             const std::vector<trainer_view>& trainers);

// Why a stage of `min_trainers` members needing `memory_bytes` each is still
// queued in `zone` ("" = any): no live trainer, none with enough memory, too
// few for its group, all busy, or behind other jobs in the queue.
std::string waiting_reason(const std::string& zone, std::uint32_t min_trainers, std::uint64_t memory_bytes,
                           const std::vector<trainer_view>& trainers);

}  // namespace loom::scheduler
