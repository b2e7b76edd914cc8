// The aggregator's control plane, through the service's gateway: requests
// reach their handler through a handler_table built in the constructor.
//   StartAggregationRequest (operator)  starts a granted DiLoCo job in the engine
//                                       (from a placed site's trainer key only)
//   ExportGlobalRequest (operator)      a granted stage's end: export, retire
//   AggregatorStatusRequest (viewer)    jobs, rounds per fragment, counters: the
//                                       token's tenant's (an admin's: all)
//   InspectCheckpointRequest (operator) verifies a checkpoint under <data>/jobs for
//                                       this deployment's scheduler key only
//                                       (checkpoint_inspect.hpp)
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
class ExportGlobalRequest;
class InspectCheckpointRequest;
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
  // data_dir: <data>, whose jobs/ InspectCheckpoint may read and whose
  // keys/checkpoint.key verifies.
  aggregator_logic(std::shared_ptr<engine> jobs, delta_endpoint where, std::string data_dir);
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override {
    return table_.dispatch(type, body, ctx);
  }

 private:
  runtime::handled status(const loom::v1::AggregatorStatusRequest& req, const runtime::call_context& ctx);
  runtime::handled start(const loom::v1::StartAggregationRequest& req, const runtime::call_context& ctx);
  runtime::handled export_global(const loom::v1::ExportGlobalRequest& req, const runtime::call_context& ctx);
  runtime::handled inspect(const loom::v1::InspectCheckpointRequest& req, const runtime::call_context& ctx);

  std::shared_ptr<engine> jobs_;
  delta_endpoint where_;
  std::string data_dir_;
  runtime::handler_table table_{"aggregator"};
};

}  // namespace loom::aggregator
