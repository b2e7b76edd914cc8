// The ingest service's logic. Today: the dataset catalogue (empty until the
// ingest issue lands imports). Runs inside the supervised service actor.
#pragma once

#include "libs/runtime/service_logic.hpp"

namespace loom::ingest {

class ingest_logic final : public runtime::service_logic {
 public:
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override;
};

}  // namespace loom::ingest
