#include "services/aggregator/aggregator_logic.hpp"

#include "loom/v1/aggregator.pb.h"

namespace loom::aggregator {

aggregator_logic::aggregator_logic() {
  using namespace loom::v1;
  // The outer loop's round and sites (viewer): round 0, no sites, until rounds exist.
  table_.on<AggregatorStatusRequest>(
      [this](const AggregatorStatusRequest& r, const runtime::call_context&) { return status(r); });
}

runtime::handled aggregator_logic::status(const loom::v1::AggregatorStatusRequest&) {
  return runtime::reply(loom::v1::AggregatorStatusReply{});
}

}  // namespace loom::aggregator
