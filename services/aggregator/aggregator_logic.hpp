// The aggregator's logic (cloud side). Today: status of the outer loop (no
// rounds yet); DiLoCo rounds arrive with the aggregator issue. Requests reach
// their handler through a handler_table built in the constructor.
#pragma once

#include "libs/runtime/handler_table.hpp"
#include "libs/runtime/service_logic.hpp"

namespace loom::v1 {
class AggregatorStatusRequest;
}

namespace loom::aggregator {

class aggregator_logic final : public runtime::service_logic {
 public:
  aggregator_logic();
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override {
    return table_.dispatch(type, body, ctx);
  }

 private:
  runtime::handled status(const loom::v1::AggregatorStatusRequest& req);

  runtime::handler_table table_{"aggregator"};
};

}  // namespace loom::aggregator
