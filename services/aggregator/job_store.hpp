// job_store: an aggregation's state on disk, one file per job,
// <data>/aggregator/<job>/state.bin, replaced atomically (files::write_atomic:
// temp, fsync, rename, fsync dir) after every outer step, so a kill -9 leaves
// either the previous step's state or this one's, never a mix:
//
//   "LOOMAGG1" | u64 LE header length | AggregationState (protobuf) |
//   params fp32 | momentum fp32 | downlink residual fp32      (raw, LE)
//
// The header carries the spec, versions, sites with their last round per
// fragment, the round counters, the grant that created the job and the
// SHA-256 of the tensor bytes.
// Stateless functions; one writer per file (the job's owner).
#pragma once

#include "services/aggregator/aggregation.hpp"

#include <string>
#include <vector>

namespace loom::aggregator {

// <data>/aggregator/<job>/state.bin
std::string state_path(const std::string& data_dir, const std::string& job);

status save_state(const std::string& path, const saved_state& s);
// corruption naming the file and what is wrong (magic, header, sizes, digest).
result<saved_state> load_state(const std::string& path);

// Every job directory under <data>/aggregator holding a state.bin, sorted.
std::vector<std::string> saved_jobs(const std::string& data_dir);

// A retired aggregation's tombstone (loom.v1.RetiredAggregation, written by
// the engine): <data>/aggregator/<job>/retired, in place of its state.bin,
// kept until its grant expires so the grant cannot start the job again.
std::string retired_path(const std::string& data_dir, const std::string& job);
// Every job directory holding one, sorted.
std::vector<std::string> retired_jobs(const std::string& data_dir);

}  // namespace loom::aggregator
