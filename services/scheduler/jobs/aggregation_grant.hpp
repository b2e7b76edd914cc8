// aggregation_grant: the grant a diloco stage's assignment carries (issue 24,
// libs/diloco/grant). When the scheduler places a diloco stage it tells its
// trainers, in each assignment, what the cloud's aggregator may run for it:
// the job, stage and tenant, the cloud's stage dir (the only place the
// stage's global model may be exported to), the placed sites by rank, the
// AggregationSpec built from the stage's config (libs/diloco/grant/
// stage_spec.hpp, as the trainers build it) starting from the job's own
// lineage (the previous stage's checkpoint, or none), and an expiry; signed
// with the cloud's token key. Without one no aggregation starts.
// Pure: no clock (the lifetime runs from the stage's start), no I/O; called
// by job_manager::assignment_of on the scheduler actor.
#pragma once

#include "services/scheduler/jobs/job_store.hpp"

#include <chrono>
#include <string>
#include <string_view>

namespace loom::scheduler {

// How long a grant lasts from its stage's start. Past it the aggregator
// retires the aggregation (it cannot ask the scheduler whether the job
// ended), so it must outlast any stage this platform runs (the GPT-2 124M
// diloco runs take hours); a stage placed again keeps its start, so a stage
// running longer than this fails its next StartAggregation.
inline constexpr std::chrono::hours grant_lifetime{24 * 30};

// The serialized loom.v1.AggregationGrant for stage `s` of job `j` as
// assigned (its filled config, its stage dir, the init_from the assignment
// carries), or "" when the stage is not a diloco stage or `key` is empty.
std::string aggregation_grant_for(const job_rec& j, const stage_rec& s, const std::string& config_toml,
                                  const std::string& stage_dir, const std::string& init_from, std::string_view key);

}  // namespace loom::scheduler
