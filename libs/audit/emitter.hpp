// Audit emission with a durable local spool.
//
// emit() queues a record (thread-safe, never blocks on the network). The
// emitter's own thread writes queued records to the spool (one fdatasync per
// batch: group commit), PUSHes unconfirmed ones to the audit service, and
// asks the audit service for its stored watermark for this source to trim the
// spool. What was lost in flight (audit killed, link down) is re-sent from the
// watermark; the audit service stores each (source, seq) once, in order.
// The emitter thread owns both of its ZeroMQ sockets. A caller that must not
// answer before its record is durable (mutating requests: exactly once even
// if the process dies right after) waits for spooled() to reach emit()'s
// ordinal; on_spooled() wakes it.
#pragma once

#include "libs/audit/record.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace zmq {
class context_t;
}

namespace loom::audit {

class spool;

struct emitter_options {
  std::string source;          // unique per emitting process identity, e.g. "scheduler@local"
  std::string spool_dir;
  std::string push_endpoint;   // audit service PULL
  std::string rpc_endpoint;    // audit service ROUTER (watermark queries)
  // Audit replicas (issue 30: `loom up --audit-replicas N`): every replica's
  // ROUTER and PULL, the first of each pair's kind first. When set (more
  // than one), the watermark queries go over a replica-set client (a standby
  // names the leader) and records are pushed to the PULL of the replica that
  // answered last, switching, and re-sending from the watermark, when the
  // lead moves. A standby stores nothing (it is fenced), so nothing is lost.
  std::vector<std::pair<std::string, std::string>> replicas;  // {rpc, pull}
  std::string server_public;   // audit service CURVE public key
  wire::curve_keypair mine;
  std::function<std::string()> token;  // bearer token for watermark queries
  // No watermark progress for this long while records are outstanding -> re-send.
  std::chrono::milliseconds resend_after{1500};
  // How often to ask for the watermark while records are outstanding.
  std::chrono::milliseconds poll_every{200};
};

class emitter {
 public:
  static result<std::unique_ptr<emitter>> start(zmq::context_t& ctx, emitter_options opts);
  ~emitter();  // writes what is queued to the spool, then stops (bounded: ≤ 1 s)

  // Thread-safe, non-blocking. Returns the record's ordinal in this process
  // (1, 2, …): it is durable in the spool once spooled() reaches it.
  std::uint64_t emit(record r);
  std::uint64_t spooled() const;      // records durable in the spool so far (this process)
  // Called on the emitter's thread each time records became durable (the
  // gateway holds audited replies until then). Set before use; null clears it.
  void on_spooled(std::function<void()> fn);
  std::uint64_t queued() const;       // not yet in the spool
  std::uint64_t pending() const;      // in the spool, not confirmed stored by audit
  std::uint64_t confirmed() const;    // highest seq audit confirmed
  std::uint64_t last_seq() const;     // highest seq written to the spool
  // Waits until everything emitted so far is confirmed stored (tests, shutdown).
  bool wait_confirmed(std::chrono::milliseconds timeout);
  // Waits until everything emitted so far is durable in the spool.
  bool wait_spooled(std::chrono::milliseconds timeout);

 private:
  emitter(zmq::context_t& ctx, emitter_options opts, std::unique_ptr<spool> sp);
  void run();

  zmq::context_t& ctx_;
  emitter_options opts_;
  std::unique_ptr<spool> spool_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::atomic<std::uint64_t> emitted_{0}, spooled_{0}, confirmed_{0}, last_seq_{0};
  std::atomic<bool> stop_{false};
  std::mutex notify_mu_;  // guards notify_ and its calls
  std::function<void()> notify_;
  std::thread thread_;
};

}  // namespace loom::audit
