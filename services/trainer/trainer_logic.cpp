#include "services/trainer/trainer_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/trainer.pb.h"

namespace loom::trainer {

runtime::handled trainer_logic::handle(const std::string& type, const std::string& body,
                                       const runtime::call_context&) {
  using namespace runtime;
  if (is<loom::v1::TrainerStatusRequest>(type)) {
    auto req = parse_as<loom::v1::TrainerStatusRequest>(body);
    if (!req) return fail(req.err());
    const work_view v = board_->view();
    loom::v1::TrainerStatusReply rep;
    rep.set_state(std::string(to_string(v.phase)));
    rep.mutable_job()->set_value(v.job);
    rep.set_stage(v.stage);
    rep.set_outcome(v.outcome);
    rep.set_attempt(v.attempt);
    rep.set_step(v.step);
    rep.set_total_steps(v.total_steps);
    rep.set_loss(v.loss);
    rep.set_tokens_per_s(v.tokens_per_s);
    rep.set_rank(v.rank);
    rep.set_world(v.world);
    rep.set_generation(v.generation);
    rep.set_checkpoint(v.checkpoint);
    rep.set_message(v.message);
    return reply(rep);
  }
  return unknown_type("trainer", type);
}

}  // namespace loom::trainer
