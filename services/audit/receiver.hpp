// The audit service's PULL side: one thread owns a CURVE PULL socket and the
// audit_log's connection, and stores what arrives in batches (one transaction,
// one durable commit per batch) before the watermarks move.
#pragma once

#include "libs/wire/curve.hpp"
#include "services/audit/audit_log.hpp"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace zmq {
class context_t;
}
namespace loom::metrics {
class service_metrics;
}

namespace loom::audit_service {

class receiver {
 public:
  // Binds `endpoint` (e.g. tcp://127.0.0.1:PORT) as a CURVE server in `ctx`,
  // whose ZAP handler must already be bound. Throws zmq::error_t if it cannot bind.
  // `leads`: whether this process may store (audit replicas, issue 30: the
  // lease holder); a standby drops what reaches it (counted as
  // outcome="standby"; its emitter re-sends to the leader from the
  // watermark), writes no checkpoint, and reloads the log's tail when it
  // takes the lead. Null: always.
  receiver(zmq::context_t& ctx, const wire::curve_keypair& keys, std::string endpoint,
           std::shared_ptr<audit_log> log, metrics::service_metrics* metrics,
           std::function<bool()> leads = nullptr);
  ~receiver();  // stops and joins within ~100 ms

 private:
  void run(void* socket);

  std::shared_ptr<audit_log> log_;
  metrics::service_metrics* metrics_;
  std::function<bool()> leads_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace loom::audit_service
