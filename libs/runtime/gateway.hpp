// The ZeroMQ <-> actor gateway: the service's main thread owns the ROUTER and
// runs this loop. Per request: decode (bad frames answered or dropped, and
// counted), authorize against the policy table (denials answered, counted and
// audited), answer Health itself, post everything else to the supervised
// service actor, and send its reply when the actor's callback wakes the loop
// through an eventfd. Mutating requests and denials become audit records, and
// their replies are held until the record is durable in the spool (group
// commit: one fdatasync serves every reply of a batch), so a request that was
// answered was audited, even if the process dies right after. A denial the
// logic answers (permission_denied, unauthenticated) is recorded like the
// gateway's own, reads included (gateway_audit.hpp), always under the real
// caller: CURVE peer, token principal and the record's tenant. Identical
// denials repeated within `deny_merge_window` become one counted summary
// record (denial_merge.hpp) instead of a record each. Before the token is
// looked at, the connection's CURVE principal must still be admitted
// (admission.hpp: a revoked site's connections are refused) and an unenrolled
// key may send only token-free requests (a site's enrolment). A site's bearer
// token is bound to its site's keys, business and admission (auth::authorize).
#pragma once

#include "libs/audit/record.hpp"
#include "libs/runtime/denial_merge.hpp"
#include "libs/runtime/service.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace loom::wire {
class router_server;
struct request;
struct reply;
}  // namespace loom::wire

namespace loom::runtime {

class actor_host;

struct gateway_options {
  std::string token_key;              // raw HMAC key bytes
  std::string epoch_file;             // re-read at most once a second
  // A request the actor has not answered by then gets deadline_exceeded
  // (the actor crashed while handling it, or is stuck).
  std::chrono::milliseconds deadline{10000};
  // Identical denials (principal, action, reason, peer) within this window
  // after the first are counted into one summary record at its end: a client
  // retrying with a stale token 10 times a second writes 2 rows per 10 s, not
  // 100, and an operator still sees the repeats within seconds.
  std::chrono::milliseconds deny_merge_window{10000};
};

class gateway {
 public:
  gateway(service_env& env, wire::router_server& server, actor_host& host, gateway_options opts);
  ~gateway();

  // Serves until request_stop(). Returns 0, or 70 when the supervisor escalated.
  int run();
  // Async-signal-safe: may be called from a signal handler.
  void request_stop();

 private:
  struct pending {
    std::string identity;
    std::string request_id;
    std::string type;
    std::chrono::steady_clock::time_point started;
    std::chrono::steady_clock::time_point deadline;
    bool mutating = false;
    std::string principal, role, tenant, peer;
    std::string record_tenant;  // the audit record's tenant (auth::record_tenant)
    std::optional<handled> result;  // answered by the logic, its commit not yet durable
  };
  struct finished {
    std::uint64_t id;
    handled result;
  };

  void on_request(std::string identity, std::string peer, wire::request req);
  // Why the connection's CURVE principal may not send `type` ("" = it may):
  // an unenrolled key sends only token-free requests; a revoked site nothing.
  std::string peer_refusal(const std::string& peer, const std::string& type) const;
  // Records a denial (or counts it into its window) and answers it with an
  // error of `code` (the gateway's) or with `rep` (the logic's).
  void deny(std::string identity, const denial& d, errc code);
  void deny(std::string identity, const denial& d, wire::reply rep, const std::string& job_id = {},
            const std::string& payload = {});
  // Emits the summary records of the merge windows that closed (all: `all`).
  void emit_denial_summaries(bool all);
  void answer(const pending& p, const handled& h);
  // Returns the record's ordinal in the emitter (see audit::emitter::emit).
  // The reason is stored on one line (control bytes as \xHH).
  std::uint64_t emit_audit(const std::string& principal, const std::string& role, const std::string& action,
                           const std::string& request_id, audit::decision outcome, const std::string& reason,
                           const std::string& peer, const std::string& tenant, const std::string& job_id = {},
                           const std::string& payload = {});
  // Sends `rep` once audit record `ordinal` is durable (at once if it is).
  void send_after_audit(std::uint64_t ordinal, std::string identity, wire::reply rep);
  void release_held(std::chrono::steady_clock::time_point now);
  void drain_finished();
  void drain_committed();  // answers the pending whose commit ticket resolved
  // answer(), or an unavailable error when h's commit ticket failed.
  void answer_durable(const pending& p, handled h);
  void expire(std::chrono::steady_clock::time_point now);
  std::uint64_t current_epoch();
  void wake();

  service_env& env_;
  wire::router_server& server_;
  actor_host& host_;
  gateway_options opts_;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, pending> pending_;
  std::mutex mu_;                 // guards finished_
  std::deque<finished> finished_;
  struct held {
    std::uint64_t ordinal;
    std::chrono::steady_clock::time_point since;
    std::string identity;
    std::unique_ptr<wire::reply> rep;
  };
  std::deque<held> held_;  // replies waiting for their audit record, in ordinal order
  denial_merge denials_;
  std::uint64_t epoch_ = 0;
  std::chrono::steady_clock::time_point epoch_read_{};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace loom::runtime
