// stage_spec: the aggregation a diloco stage runs, from its run config. The
// scheduler builds it to grant it at placement (aggregation_grant.hpp in
// services/scheduler/jobs), each trainer builds it again to ask for it, and
// the aggregator starts only the spec it was granted; so both builders are
// this one. Pure functions; thread-safe.
#pragma once

#include "libs/runspec/run_config.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace loom::v1 {
class AggregationSpec;
}

namespace loom::diloco {

// The aggregation's name: "<job>.<stage>" with every character outside
// [A-Za-z0-9._-] as '-'; past 64 characters (the aggregator's job names),
// the first 55, '-' and 8 hex digits of the SHA-256 of "<job>.<stage>".
std::string aggregation_name(std::string_view job, std::string_view stage);

// The stage's sites by rank: diloco.sites' names for edge sites, else this
// deployment's "site-0" ... "site-(N-1)".
std::vector<std::string> stage_sites(const runspec::run_config& cfg);

// The stage's AggregationSpec. `cfg` is the stage's config as the run spec
// says (train.seed unchanged by a member's rank); `init_from` is where it
// starts from: the job's previous stage's final checkpoint (the scheduler's
// init_from, or a "${stage.NAME.checkpoint}" filled in), "" for a first
// stage, which starts from GPT-2's initialisation drawn from train.seed
// (max(1, seed): 0 would mean zeros). max_delta_tokens = train.steps × batch
// × seq_len × grad_accum (a delta covers at most the whole stage);
// min_sites = diloco.min_sites.
void stage_spec(const runspec::run_config& cfg, const std::string& name, const std::string& init_from,
                loom::v1::AggregationSpec* out);

}  // namespace loom::diloco
