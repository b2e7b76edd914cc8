// The trainer service's logic: TrainerStatus tells what this trainer is doing
// — the work_board the worker (worker.hpp) keeps: idle, preparing, running,
// stopping, regrouping or done, with the stage, its group and its progress
// (the stage and progress only to admins and the job's tenant: work_state.hpp
// shown_to), and the model checks and exports it runs for clients (export/export_wire.hpp:
// Start/Get/Fetch/EndModelExport over export_tasks, which outlive the logic).
// Runs in the supervised service actor; reads the board, changes nothing.
#pragma once

#include "libs/runtime/handler_table.hpp"
#include "libs/runtime/service_logic.hpp"
#include "services/trainer/export/export_tasks.hpp"
#include "services/trainer/work_state.hpp"

#include <memory>

namespace loom::trainer {

class trainer_logic final : public runtime::service_logic {
 public:
  // exports: null = none here (every export request answers unimplemented).
  explicit trainer_logic(std::shared_ptr<const work_board> board, std::shared_ptr<export_tasks> exports = nullptr);
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override {
    return table_.dispatch(type, body, ctx);
  }

 private:
  std::shared_ptr<const work_board> board_;
  runtime::handler_table table_{"trainer"};
};

}  // namespace loom::trainer
