// Local lifecycle operations — `loom up`, `loom down`, `loom token
// revoke-all`, `loom keys init` — run on this machine, not through a service
// gateway, so the CLI checks and audits them itself:
//  * require_admin: only the admin may run them — whoever holds the admin
//    key (can read keys/token.key); a token presented with --token or
//    $LOOM_TOKEN must verify against that key with role admin.
//  * require_owner (`loom down` only): stopping the data dir's own processes
//    needs no key and no token — its owner can read their pid files and
//    signal them anyway; a damaged admin key must not keep them running.
//  * audit_local: one audit record per operation, durable in the CLI's own
//    spool <data>/spool/cli (source cli@<host>) before the operation goes on,
//    and pushed to the audit service when it runs. What waits in the spool
//    (operations while the services were down) is delivered by the next
//    audited command that finds the audit service running — `loom up` once
//    everything is healthy.
// Called from a command's main thread.
#pragma once

#include "client/cli.hpp"
#include "libs/audit/record.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace loom::cli {

// The caller of a lifecycle operation.
struct caller {
  std::string principal;  // the token's principal, or "local:<user>" for the key holder
  std::string role;       // "admin" when allowed
};

// The caller when it is the admin; otherwise permission_denied saying what
// `what` ("loom down") needs and what is missing.
result<caller> require_admin(const context& c, const std::string& what);

// The caller of `loom down` (`what`): the owner of the data dir (its uid is
// this process's effective uid) or root; permission_denied naming the data
// dir's owner otherwise. A token, presented or not, is neither needed nor
// consulted. Caller: {"local:<user>", "owner"}.
result<caller> require_owner(const context& c, const std::string& what);

// The caller as far as it can be told without the admin: for records of a refusal.
caller presented_caller(const context& c);

struct local_event {
  std::string action;  // "loom.up", "loom.down", "loom.token.revoke_all", "loom.keys.init"
  caller who;
  audit::decision outcome = audit::decision::allow;
  std::string reason;   // why refused / what failed
  std::string payload;  // what was done ("stopped watcher (pid 1), audit (pid 2)")
};

// Writes `e` to the CLI's spool (durable before it returns; false, with a
// warning on stderr, when it could not be). When the audit service of this
// data dir runs, waits up to `deliver` until it has stored everything the
// spool holds.
bool audit_local(context& c, const local_event& e,
                 std::chrono::milliseconds deliver = std::chrono::milliseconds(3000));

// `loom up`'s --import-root DIR...: absolute, without a trailing '/', each
// checked (layout::check_import_root); ingest checks them again at start.
// Also `loom init`'s.
result<std::vector<std::string>> import_roots_option(const context& c);

// <data>/database.url: the store `loom init --database URL` chose (0600).
std::string saved_database_path(const layout::paths& p);
// Exports it as LOOM_DATABASE_URL for this process and what it starts, unless
// the environment names a store already (init.cpp; main() calls it for every
// command, so `loom up` starts the services on it and `loom audit verify` reads it).
void use_saved_database(const layout::paths& p);

}  // namespace loom::cli
