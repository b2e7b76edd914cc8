#include "libs/wire/client.hpp"

#include "libs/status/unix_time.hpp"
#include "libs/wire/limits.hpp"

#include <algorithm>

namespace loom::wire {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

link_time since_epoch(steady_clock::time_point t) {
  return std::chrono::duration_cast<link_time>(t.time_since_epoch());
}

// A reply must be one frame (the DEALER strips nothing; the ROUTER already
// took the routing id).
result<reply> decode_message(const multipart& frames) {
  if (frames.size() != 1)
    return make_error(errc::invalid_argument, "reply of " + std::to_string(frames.size()) + " frames, expected 1");
  return decode_reply(frames[0].data(), frames[0].size());
}

}  // namespace

client::client(zmq::context_t& ctx, std::string endpoint, std::string server_public_z85, curve_keypair mine,
               client_options opts)
    : ctx_(ctx), endpoint_(std::move(endpoint)), curve_(true),
      server_public_z85_(std::move(server_public_z85)), mine_(std::move(mine)), opts_(std::move(opts)) {
  reconnect();
}

client::client(zmq::context_t& ctx, bench_plaintext_t, std::string endpoint, client_options opts)
    : ctx_(ctx), endpoint_(std::move(endpoint)), curve_(false), opts_(std::move(opts)) {
  reconnect();
}

void client::reconnect() {
  socket_.reset();  // linger 0 (apply_common_options): queued requests die with it
  socket_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  apply_common_options(*socket_);
  if (curve_) make_curve_client(*socket_, mine_, server_public_z85_);
  socket_->connect(endpoint_);
  // Messages still "on the wire" belonged to the old socket: gone with it.
  if (link_) link_->forget();
  if (opts_.link && opts_.link->shapes() && !link_) link_.emplace(*opts_.link, steady_clock::now());
}

bool client::send_bytes(const std::string& bytes) {
  multipart m;
  m.emplace_back(bytes.data(), bytes.size());
  return send_message(*socket_, link_ ? &*link_ : nullptr, std::move(m));
}

result<reply> client::next_reply(steady_clock::time_point deadline) {
  auto m = recv_message(*socket_, link_ ? &*link_ : nullptr, deadline);
  if (!m) return make_error(errc::deadline_exceeded, "no reply by the deadline");
  last_reply_bytes_ = m->empty() ? 0 : m->front().size();
  return decode_message(*m);
}

bool client::send_async(const request& req) { return send_bytes(encode(req)); }

result<reply> client::recv(milliseconds timeout) {
  auto rep = next_reply(steady_clock::now() + timeout);
  if (rep.code() == errc::deadline_exceeded)
    return make_error(errc::deadline_exceeded,
                      "no reply from " + endpoint_ + " within " + std::to_string(timeout.count()) + " ms");
  return rep;
}

result<reply> client::call(request req) {
  // The first place that can tell: a body the server's decoder refuses is
  // never sent (it would only cost the transfer and the deadline).
  if (req.body.size() > max_body_bytes)
    return make_error(errc::invalid_argument, req.type + " of " + std::to_string(req.body.size()) +
                                                  " bytes is over the " + std::to_string(max_body_bytes >> 20) +
                                                  " MiB a request may carry (libs/wire/limits.hpp); not sent");
  if (req.request_id.empty()) req.request_id = new_request_id();
  const int attempts = 1 + std::max(0, opts_.retries);
  for (int i = 0; i < attempts; ++i) {
    if (i > 0) {
      ++req.attempt;
      ++retried_;
    }
    req.sent_unix_ns = static_cast<std::uint64_t>(loom::unix_now_ns());
    std::string bytes = encode(req);
    link_observation seen{since_epoch(steady_clock::now()), {}, bytes.size(), 0, false};
    const auto deadline = steady_clock::now() + opts_.timeout;
    if (send_bytes(bytes)) {
      for (;;) {
        auto rep = next_reply(deadline);
        if (rep.code() == errc::deadline_exceeded) break;
        if (rep.ok() && rep->request_id == req.request_id) {
          if (opts_.observe) {
            seen.replied = since_epoch(steady_clock::now());
            seen.bytes_in = last_reply_bytes_;
            seen.ok = true;
            opts_.observe(seen);
          }
          return rep;
        }
        ++discarded_;  // stale or garbage
      }
    }
    if (opts_.observe) {
      seen.replied = since_epoch(steady_clock::now());
      opts_.observe(seen);
    }
    // Lazy Pirate: the only safe way to forget a request in flight on a
    // DEALER is a fresh socket; a late reply then goes to the old, closed one.
    reconnect();
  }
  return make_error(errc::unavailable,
                    "no reply from " + endpoint_ + " after " + std::to_string(attempts) + " attempts");
}

}  // namespace loom::wire
