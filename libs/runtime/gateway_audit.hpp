// What the gateway writes to the audit log for a request the service's logic
// answered (docs/security.md, "Audit"): every state-changing request once,
// and every denial — the gateway's own and the logic's, reads included —
// under the real caller (CURVE peer and token principal), repeated identical
// denials merged (denial_merge.hpp). Pure functions; any thread.
#pragma once

#include "libs/audit/record.hpp"
#include "libs/status/status.hpp"

namespace loom::runtime {

enum class reply_record {
  none,     // a read that succeeded or failed for another reason: not recorded
  request,  // a state-changing request: one record of its own (allow, deny or error)
  denial,   // a read the logic refused: recorded like a gateway denial, merged when repeated
};

// permission_denied or unauthenticated: a denial, whoever answered it.
bool is_denial(errc code);
reply_record record_of(bool mutating, errc code);
// allow for ok, deny for a denial, error for anything else.
audit::decision decision_of(errc code);

}  // namespace loom::runtime
