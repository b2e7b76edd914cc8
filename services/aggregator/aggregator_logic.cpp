#include "services/aggregator/aggregator_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/aggregator.pb.h"

namespace loom::aggregator {

runtime::handled aggregator_logic::handle(const std::string& type, const std::string& body,
                                          const runtime::call_context&) {
  using namespace runtime;
  if (is<loom::v1::AggregatorStatusRequest>(type)) {
    auto req = parse_as<loom::v1::AggregatorStatusRequest>(body);
    if (!req) return fail(req.err());
    return reply(loom::v1::AggregatorStatusReply{});
  }
  return unknown_type("aggregator", type);
}

}  // namespace loom::aggregator
