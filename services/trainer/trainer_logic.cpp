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
    loom::v1::TrainerStatusReply rep;
    rep.set_state("idle");
    return reply(rep);
  }
  return unknown_type("trainer", type);
}

}  // namespace loom::trainer
