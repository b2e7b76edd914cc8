// Shared plumbing of the `loom` commands: the resolved data dir, output mode,
// the caller's token, and typed calls to a service over CURVE.
// Each command runs on the main thread; nothing here is shared across threads.
#pragma once

#include "client/args.hpp"
#include "client/output.hpp"
#include "libs/layout/layout.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/envelope.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace zmq {
class context_t;
}

namespace loom::cli {

// Exit codes of every command.
enum exit_code { ok_exit = 0, error_exit = 1, usage_exit = 2, denied_exit = 3, unavailable_exit = 4 };

struct context {
  args a;
  layout::paths paths;
  bool json = false;
  std::chrono::milliseconds timeout{2000};
  std::unique_ptr<zmq::context_t> zmq;
  // call() reaches exactly the named process ("scheduler" is then the first
  // replica, not whichever leads): status and ping probe each process.
  bool pinned = false;

  explicit context(args parsed);
  ~context();

  // --token, else $LOOM_TOKEN (invalid_argument when set but empty), else
  // <data>/admin.token (read_token_file).
  result<std::string> token() const;
  // The token for a call reached as `r` says (layout::reach): token() when
  // r.token_file is empty (this deployment's own services); else (an edge
  // site's call to the cloud's services) the caller's --token or $LOOM_TOKEN
  // — invalid_argument when it is this deployment's own, which never leaves
  // it — or r.token_file (keys/cloud/token).
  result<std::string> token_for(const layout::service_reach& r) const;
  // One request to `service` (short name); unavailable when it is not running.
  // Reached as layout::reach says: at an edge site the cloud's scheduler and
  // aggregator with the cloud's keys (keys/cloud/) and the site's token.
  // request_id: "" = a fresh one (retries of this call reuse it either way).
  result<wire::reply> call(const std::string& service, const std::string& type, const std::string& body,
                           int retries = 1, const std::string& request_id = "");
};

// What a Health call said about one service.
struct health_info {
  std::string name;
  bool reachable = false, healthy = false;
  std::int64_t pid = 0;
  std::uint64_t uptime_ms = 0, restarts = 0, audit_spooled = 0;
  std::string endpoint, metrics, version, node_id, error;
};
health_info probe(context& c, const std::string& service);

// Prints "error: ..." (or {"error":...} with --json) and returns the exit code for it.
// The message is printed through printable(): it may hold a service's words.
int fail(const context& c, const error& e);
// Prints `text` as is on stderr and returns usage_exit: whoever builds it
// escapes what came from the command line (printable()).
int usage(const std::string& text);

// A token file (admin.token): its first line, trailing spaces dropped; at
// most 64 KiB is read (a token is a few hundred bytes).
result<std::string> read_token_file(const std::string& path);

// Commands (each returns the process exit code).
int cmd_up(context& c);
int cmd_down(context& c);
int cmd_watch(context& c);  // internal: the detached supervisor `loom up` starts
int cmd_status(context& c);
int cmd_ping(context& c);
int cmd_token(context& c);
int cmd_keys(context& c);
int cmd_keys_status(context& c);  // `loom keys status`: key-encryption keys and their ages (keys_status.cpp)
int cmd_keys_rotate(context& c);  // `loom keys rotate`: a new audit KEK version (audited)
int cmd_audit(context& c);        // `loom audit verify|trail|tail`
int cmd_tokenize(context& c);
int cmd_data(context& c);      // `loom data SUB`: dispatches to the cmd_data_* below
int cmd_data_pii(context& c);
int cmd_job(context& c);        // `loom job submit|list|show|cancel|watch|logs`
int cmd_templates(context& c);  // `loom templates`
int cmd_site(context& c);       // `loom site token|revoke|list|enrol`
int cmd_site_enrol(context& c); // `loom site enrol` (site_enrol.cpp)
int cmd_model(context& c);      // `loom model list|show|diff|rollback` (model.cpp)
int cmd_node(context& c);       // `loom node drain|undrain` (node.cpp)
int cmd_diagnose(context& c);   // `loom diagnose JOB` (diagnose.cpp)
int cmd_init(context& c);       // `loom init` (init.cpp)
int cmd_report(context& c);     // `loom report JOB --out FILE` (report.cpp)
int cmd_suggest(context& c);    // `loom suggest JOB` (suggest.cpp)

// Creates whatever keys and the first admin token are missing (idempotent).
status ensure_keys(const layout::paths& p);

}  // namespace loom::cli
