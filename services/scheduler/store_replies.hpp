// How the scheduler's request handlers answer an error that came back from the
// state store or from a registry over it (scheduler_logic.cpp,
// scheduler_logic_nodes.cpp, sites/site_handlers.cpp, models/model_handlers.cpp):
//   store_failed(e)      a read the request needed failed: not_found passes, the
//                        rest is unavailable ("state store: ...", worth a retry);
//   refused_or_store(e)  a registry call that judges the request: its verdict
//                        passes (invalid_argument, not_found, permission_denied,
//                        conflict, already_exists, corruption: none heals on a
//                        retry); anything else came from the store: unavailable.
// Stateless; any thread.
#pragma once

#include "libs/runtime/service_logic.hpp"

namespace loom::scheduler {

runtime::handled store_failed(const error& e);
runtime::handled refused_or_store(const error& e);

}  // namespace loom::scheduler
