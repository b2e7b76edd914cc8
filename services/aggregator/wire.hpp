// wire: the aggregator's protobuf <-> domain mapping for the round protocol,
// with the checks a header must pass before its payload is even decoded:
// DeltaHeader and GlobalUpdateHeader <-> messages.hpp's structs, the payload
// frame against its header (size, SHA-256), and a fragment's round state
// (job_rounds) into RoundStatus. Pure functions; any thread.
#pragma once

#include "services/aggregator/aggregation.hpp"
#include "services/aggregator/messages.hpp"
#include "services/aggregator/rounds.hpp"

#include <string>
#include <string_view>

namespace loom::v1 {
class DeltaHeader;
class GlobalUpdateHeader;
class RoundStatus;
class AggregationSpec;
}  // namespace loom::v1

namespace loom::aggregator {

// invalid_argument naming the field: empty job or site, a codec name that is
// not 1-32 of [a-z0-9_], zero elements, a payload of 0 bytes or larger than
// fp32 plus 4 KiB (no codec makes a fragment bigger), a digest not 32 bytes.
result<delta_header> from_wire(const loom::v1::DeltaHeader& h);
void to_wire(const delta_header& h, loom::v1::DeltaHeader* out);

// As above, plus: kind set; an outer update's base_version is version - 1.
result<global_update_header> from_wire(const loom::v1::GlobalUpdateHeader& h);
void to_wire(const global_update_header& h, loom::v1::GlobalUpdateHeader* out);

// The payload frame is the one its header describes: corruption ("truncated
// frame" or "SHA-256 mismatch") naming what differs.
status check_payload(std::uint64_t payload_bytes, std::string_view payload_sha256, std::string_view payload);

// An aggregation's spec. Zero fields take the defaults (AggregationSpec's
// comments); invalid_argument naming the field: a bad job name, an unknown
// codec, fragments 0, quorum outside (0, 1], both a snapshot and a seed, and
// whatever make_plan and the option validators refuse.
result<aggregation_spec> from_wire(const loom::v1::AggregationSpec& s);
void to_wire(const aggregation_spec& s, loom::v1::AggregationSpec* out);

// Fragment p's rounds as RoundStatus. REQUIRES: p < the job's fragments.
void to_wire(const job_rounds& j, const std::string& job, std::uint32_t p, loom::v1::RoundStatus* out);

}  // namespace loom::aggregator
