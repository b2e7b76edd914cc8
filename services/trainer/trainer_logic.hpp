// The trainer service's logic. Today: status (idle); assignments, the GPT
// engine and checkpoints arrive with the trainer issues.
#pragma once

#include "libs/runtime/service_logic.hpp"

namespace loom::trainer {

class trainer_logic final : public runtime::service_logic {
 public:
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override;
};

}  // namespace loom::trainer
