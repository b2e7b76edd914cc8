#include "services/ingest/ingest_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/ingest.pb.h"

namespace loom::ingest {

runtime::handled ingest_logic::handle(const std::string& type, const std::string& body,
                                      const runtime::call_context&) {
  using namespace runtime;
  if (is<loom::v1::ListDatasetsRequest>(type)) {
    auto req = parse_as<loom::v1::ListDatasetsRequest>(body);
    if (!req) return fail(req.err());
    return reply(loom::v1::ListDatasetsReply{});
  }
  return unknown_type("ingest", type);
}

}  // namespace loom::ingest
