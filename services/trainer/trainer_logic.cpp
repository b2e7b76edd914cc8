#include "services/trainer/trainer_logic.hpp"

#include "loom/v1/trainer.pb.h"
#include "services/trainer/export/export_wire.hpp"
#include "services/trainer/wire.hpp"

namespace loom::trainer {

trainer_logic::trainer_logic(std::shared_ptr<const work_board> board, std::shared_ptr<export_tasks> exports)
    : board_(std::move(board)) {
  using namespace loom::v1;
  // What this trainer is doing: its phase, stage, group and progress (viewer).
  table_.on<TrainerStatusRequest>([this](const TrainerStatusRequest&, const runtime::call_context&) {
    TrainerStatusReply rep;
    to_wire(board_->view(), &rep);
    return runtime::reply(rep);
  });
  // Model checks and exports for clients (export/export_wire.hpp).
  add_export_handlers(table_, std::move(exports));
}

}  // namespace loom::trainer
