#include "services/audit/receiver.hpp"

#include "libs/metrics/metrics.hpp"
#include "libs/wire/limits.hpp"

#include <zmq.hpp>

#include <cstdio>

namespace loom::audit_service {
namespace {
// Events drained per durable batch: one fdatasync covers them all.
constexpr int batch_max = 2048;

const char* name_of(event_store::outcome o) {
  switch (o) {
    case event_store::outcome::stored: return "stored";
    case event_store::outcome::duplicate: return "duplicate";
    case event_store::outcome::gap: return "gap";
    case event_store::outcome::invalid: return "invalid";
  }
  return "?";
}
}  // namespace

receiver::receiver(zmq::context_t& ctx, const wire::curve_keypair& keys, std::string endpoint,
                   std::shared_ptr<event_store> store, metrics::service_metrics* metrics)
    : store_(std::move(store)), metrics_(metrics) {
  auto sock = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::pull);
  wire::apply_common_options(*sock);
  wire::make_curve_server(*sock, keys, "loom");
  sock->bind(endpoint);
  thread_ = std::thread([this, s = sock.release()] { run(s); });
}

receiver::~receiver() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void receiver::run(void* raw) {
  std::unique_ptr<zmq::socket_t> sock(static_cast<zmq::socket_t*>(raw));
  while (!stop_) {
    zmq::pollitem_t item{sock->handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    if (!(item.revents & ZMQ_POLLIN)) continue;
    int n = 0;
    for (; n < batch_max; ++n) {
      zmq::message_t msg;
      if (!sock->recv(msg, zmq::recv_flags::dontwait)) break;
      if (msg.more()) {  // an event is one frame: drain and drop the rest
        while (msg.more() && sock->recv(msg, zmq::recv_flags::dontwait)) {}
        metrics_->add("events_total", {{"outcome", "malformed"}});
        continue;
      }
      auto o = store_->append({static_cast<const char*>(msg.data()), msg.size()});
      metrics_->add("events_total", {{"outcome", name_of(o)}});
    }
    if (auto st = store_->sync(); !st)
      std::fprintf(stderr, "audit: %s\n", st.err().to_string().c_str());
  }
}

}  // namespace loom::audit_service
