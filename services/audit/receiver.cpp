#include "services/audit/receiver.hpp"

#include "libs/metrics/metrics.hpp"
#include "libs/wire/limits.hpp"

#include <zmq.hpp>

#include <cstdio>
#include <vector>

namespace loom::audit_service {
namespace {
// Events drained per batch: one durable commit covers them all.
constexpr int batch_max = 2048;

}  // namespace

receiver::receiver(zmq::context_t& ctx, const wire::curve_keypair& keys, std::string endpoint,
                   std::shared_ptr<audit_log> log, metrics::service_metrics* metrics)
    : log_(std::move(log)), metrics_(metrics) {
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
  auto next_tick = std::chrono::steady_clock::now();
  while (!stop_) {
    zmq::pollitem_t item{sock->handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    if (auto now = std::chrono::steady_clock::now(); now >= next_tick) {
      // The time half of the checkpoint policy (every 60 s): a quiet log's
      // tail still gets signed.
      next_tick = now + std::chrono::seconds(1);
      if (auto t = log_->tick(); !t)
        std::fprintf(stderr, "audit: checkpoint failed: %s\n", t.err().to_string().c_str());
      metrics_->set("chain_seq", {}, static_cast<double>(log_->total()));
      metrics_->set("anchored_seq", {}, static_cast<double>(log_->anchored()));
    }
    if (!(item.revents & ZMQ_POLLIN)) continue;
    std::vector<std::string> batch;
    for (int n = 0; n < batch_max; ++n) {
      zmq::message_t msg;
      if (!sock->recv(msg, zmq::recv_flags::dontwait)) break;
      if (msg.more()) {  // an event is one frame: drain and drop the rest
        while (msg.more() && sock->recv(msg, zmq::recv_flags::dontwait)) {}
        metrics_->add("events_total", {{"outcome", "malformed"}});
        continue;
      }
      batch.emplace_back(static_cast<const char*>(msg.data()), msg.size());
    }
    if (batch.empty()) continue;
    auto out = log_->append_batch(batch);
    if (!out) {
      // Nothing of the batch is stored; emitters re-send from their watermark.
      std::fprintf(stderr, "audit: batch of %zu not stored: %s\n", batch.size(), out.err().to_string().c_str());
      metrics_->add("events_total", {{"outcome", "store_error"}}, static_cast<double>(batch.size()));
      continue;
    }
    metrics_->add("events_total", {{"outcome", "stored"}}, static_cast<double>(out->stored));
    metrics_->add("events_total", {{"outcome", "duplicate"}}, static_cast<double>(out->duplicate));
    metrics_->add("events_total", {{"outcome", "gap"}}, static_cast<double>(out->gap));
    metrics_->add("events_total", {{"outcome", "invalid"}}, static_cast<double>(out->invalid));
  }
  // A clean stop leaves the whole log anchored (database and anchor file):
  // a later truncation of its tail is then caught by the anchor.
  if (auto t = log_->tick(true); !t)
    std::fprintf(stderr, "audit: final checkpoint failed: %s\n", t.err().to_string().c_str());
}

}  // namespace loom::audit_service
