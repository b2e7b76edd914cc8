#include "services/scheduler/store_replies.hpp"

#include "libs/runtime/logic_pb.hpp"

namespace loom::scheduler {

runtime::handled store_failed(const error& e) {
  return runtime::fail(e.code == errc::not_found ? e.code : errc::unavailable, "state store: " + e.message);
}

runtime::handled refused_or_store(const error& e) {
  switch (e.code) {
    case errc::invalid_argument: case errc::not_found: case errc::permission_denied: case errc::conflict:
    case errc::already_exists: case errc::corruption:
      return runtime::fail(e);
    default:
      return runtime::fail(errc::unavailable, "state store: " + e.message);
  }
}

}  // namespace loom::scheduler
