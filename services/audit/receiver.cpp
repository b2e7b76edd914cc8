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
                   std::shared_ptr<audit_log> log, metrics::service_metrics* metrics,
                   std::function<bool()> leads)
    : log_(std::move(log)), metrics_(metrics), leads_(std::move(leads)) {
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
  bool led = !leads_;  // a replica reloads when it takes the lead
  while (!stop_) {
    zmq::pollitem_t item{sock->handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    const bool leading = !leads_ || leads_();
    if (leading && !led) {
      if (auto st = log_->reload(); !st) {
        std::fprintf(stderr, "audit: taking the lead: reading the chain's tail: %s\n", st.err().to_string().c_str());
        continue;  // asked again at the next pass; nothing is stored meanwhile
      }
      std::fprintf(stderr, "audit: leads; the chain's tail is seq %llu\n",
                   static_cast<unsigned long long>(log_->total()));
    }
    led = leading;
    if (!leading) {  // a standby: drop what came (its emitters re-send to the leader)
      std::size_t dropped = 0;
      zmq::message_t msg;
      while (dropped < static_cast<std::size_t>(batch_max) && sock->recv(msg, zmq::recv_flags::dontwait)) ++dropped;
      if (dropped) metrics_->add("events_total", {{"outcome", "standby"}}, static_cast<double>(dropped));
      continue;
    }
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
  if (leads_ && !leads_()) return;
  if (auto t = log_->tick(true); !t)
    std::fprintf(stderr, "audit: final checkpoint failed: %s\n", t.err().to_string().c_str());
}

}  // namespace loom::audit_service
