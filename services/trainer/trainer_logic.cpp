#include "services/trainer/trainer_logic.hpp"

#include "loom/v1/trainer.pb.h"
#include "services/trainer/export/export_wire.hpp"
#include "services/trainer/wire.hpp"

namespace loom::trainer {

trainer_logic::trainer_logic(std::shared_ptr<const work_board> board, std::shared_ptr<export_tasks> exports)
    : board_(std::move(board)) {
  using namespace loom::v1;
  // What this trainer is doing: its phase (viewer); its job, stage, group and
  // progress only to admins and to the job's tenant.
  table_.on<TrainerStatusRequest>([this](const TrainerStatusRequest&, const runtime::call_context& ctx) {
    const auto shown = shown_to(board_->view(), ctx.role == "admin", ctx.tenant);
    TrainerStatusReply rep;
    to_wire(shown.view, &rep);
    rep.set_job_withheld(shown.withheld);
    return runtime::reply(rep);
  });
  // Model checks and exports for clients (export/export_wire.hpp).
  add_export_handlers(table_, std::move(exports));
}

}  // namespace loom::trainer
