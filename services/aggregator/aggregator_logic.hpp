// The aggregator's control plane, through the service's gateway: requests
// reach their handler through a handler_table built in the constructor.
//   StartAggregationRequest (operator)  starts a DiLoCo job in the engine
//   AggregatorStatusRequest (viewer)    jobs, rounds per fragment, counters
// The sites' own traffic (join, deltas, pulls) goes to the delta server
// (delta_server.hpp), not here. Runs on the service actor; the engine is
// shared with the delta server's thread and locks itself.
#pragma once

#include "libs/runtime/handler_table.hpp"
#include "libs/runtime/service_logic.hpp"

#include <memory>
#include <string>

namespace loom::v1 {
class AggregatorStatusRequest;
class StartAggregationRequest;
}  // namespace loom::v1

namespace loom::aggregator {

class engine;

// Where sites reach the delta server (StartAggregationReply, status).
struct delta_endpoint {
  std::string endpoint, public_key;
};

class aggregator_logic final : public runtime::service_logic {
 public:
  aggregator_logic(std::shared_ptr<engine> jobs, delta_endpoint where);
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override {
    return table_.dispatch(type, body, ctx);
  }

 private:
  runtime::handled status(const loom::v1::AggregatorStatusRequest& req);
  runtime::handled start(const loom::v1::StartAggregationRequest& req);

  std::shared_ptr<engine> jobs_;
  delta_endpoint where_;
  runtime::handler_table table_{"aggregator"};
};

}  // namespace loom::aggregator
