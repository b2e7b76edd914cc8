// The aggregator's logic (cloud side). Today: status of the outer loop (no
// rounds yet); DiLoCo rounds arrive with the aggregator issue.
#pragma once

#include "libs/runtime/service_logic.hpp"

namespace loom::aggregator {

class aggregator_logic final : public runtime::service_logic {
 public:
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override;
};

}  // namespace loom::aggregator
