// The audit service's PULL side: one thread owns a CURVE PULL socket and the
// audit_log's connection, and stores what arrives in batches (one transaction,
// one durable commit per batch) before the watermarks move.
#pragma once

#include "libs/wire/curve.hpp"
#include "services/audit/audit_log.hpp"

#include <atomic>
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
  receiver(zmq::context_t& ctx, const wire::curve_keypair& keys, std::string endpoint,
           std::shared_ptr<audit_log> log, metrics::service_metrics* metrics);
  ~receiver();  // stops and joins within ~100 ms

 private:
  void run(void* socket);

  std::shared_ptr<audit_log> log_;
  metrics::service_metrics* metrics_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace loom::audit_service
