#include "libs/runtime/gateway_audit.hpp"

namespace loom::runtime {

bool is_denial(errc code) { return code == errc::permission_denied || code == errc::unauthenticated; }

reply_record record_of(bool mutating, errc code) {
  if (mutating) return reply_record::request;
  return is_denial(code) ? reply_record::denial : reply_record::none;
}

audit::decision decision_of(errc code) {
  if (code == errc::ok) return audit::decision::allow;
  return is_denial(code) ? audit::decision::deny : audit::decision::error;
}

}  // namespace loom::runtime
