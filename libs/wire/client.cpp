#include "libs/wire/client.hpp"

#include "libs/wire/limits.hpp"

#include <algorithm>

namespace loom::wire {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::uint64_t unix_now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// Reads one whole message without blocking. A reply must be one frame (the
// DEALER strips nothing; the ROUTER already took the routing id).
result<reply> recv_reply(zmq::socket_t& s) {
  zmq::message_t first, extra;
  if (!s.recv(first, zmq::recv_flags::dontwait))
    return make_error(errc::deadline_exceeded, "no reply ready");
  std::size_t frames = 1;
  for (bool more = first.more(); more; ++frames) {
    if (!s.recv(extra, zmq::recv_flags::dontwait)) break;
    more = extra.more();
  }
  if (frames != 1)
    return make_error(errc::invalid_argument, "reply of " + std::to_string(frames) + " frames, expected 1");
  return decode_reply(first.data(), first.size());
}

}  // namespace

client::client(zmq::context_t& ctx, std::string endpoint, std::string server_public_z85, curve_keypair mine,
               client_options opts)
    : ctx_(ctx), endpoint_(std::move(endpoint)), curve_(true),
      server_public_z85_(std::move(server_public_z85)), mine_(std::move(mine)), opts_(opts) {
  reconnect();
}

client::client(zmq::context_t& ctx, bench_plaintext_t, std::string endpoint, client_options opts)
    : ctx_(ctx), endpoint_(std::move(endpoint)), curve_(false), opts_(opts) {
  reconnect();
}

void client::reconnect() {
  socket_.reset();  // linger 0 (apply_common_options): queued requests die with it
  socket_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  apply_common_options(*socket_);
  if (curve_) make_curve_client(*socket_, mine_, server_public_z85_);
  socket_->connect(endpoint_);
}

bool client::wait_readable(milliseconds timeout) {
  zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
  try {
    return zmq::poll(&item, 1, std::max(timeout, milliseconds(0))) > 0;
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return false;  // treated as a short wait; callers loop on a deadline
    throw;
  }
}

bool client::send_async(const request& req) {
  return socket_->send(zmq::buffer(encode(req)), zmq::send_flags::dontwait).has_value();
}

result<reply> client::recv(milliseconds timeout) {
  if (!wait_readable(timeout))
    return make_error(errc::deadline_exceeded,
                      "no reply from " + endpoint_ + " within " + std::to_string(timeout.count()) + " ms");
  return recv_reply(*socket_);
}

result<reply> client::call(request req) {
  if (req.request_id.empty()) req.request_id = new_request_id();
  const int attempts = 1 + std::max(0, opts_.retries);
  for (int i = 0; i < attempts; ++i) {
    if (i > 0) {
      ++req.attempt;
      ++retried_;
    }
    req.sent_unix_ns = unix_now_ns();
    const auto deadline = steady_clock::now() + opts_.timeout;
    if (send_async(req)) {
      for (;;) {
        auto left = std::chrono::ceil<milliseconds>(deadline - steady_clock::now());
        if (left <= milliseconds(0) || !wait_readable(left)) break;
        auto rep = recv_reply(*socket_);
        if (rep.ok() && rep->request_id == req.request_id) return rep;
        if (rep.code() != errc::deadline_exceeded) ++discarded_;  // stale or garbage
      }
    }
    // Lazy Pirate: the only safe way to forget a request in flight on a
    // DEALER is a fresh socket; a late reply then goes to the old, closed one.
    reconnect();
  }
  return make_error(errc::unavailable,
                    "no reply from " + endpoint_ + " after " + std::to_string(attempts) + " attempts");
}

}  // namespace loom::wire
