// The audit service's PULL side: one thread owns a CURVE PULL socket,
// stores each incoming AuditEvent in the event_store, and makes each batch
// durable (one fdatasync per batch) before the watermark moves.
#pragma once

#include "libs/wire/curve.hpp"
#include "services/audit/event_store.hpp"

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
           std::shared_ptr<event_store> store, metrics::service_metrics* metrics);
  ~receiver();  // stops and joins within ~100 ms

 private:
  void run(void* socket);

  std::shared_ptr<event_store> store_;
  metrics::service_metrics* metrics_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace loom::audit_service
