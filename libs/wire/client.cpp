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

link_time since_epoch(steady_clock::time_point t) {
  return std::chrono::duration_cast<link_time>(t.time_since_epoch());
}

// Reads one whole message without blocking; nullopt when none is ready.
std::optional<multipart> read_message(zmq::socket_t& s) {
  zmq::message_t first;
  if (!s.recv(first, zmq::recv_flags::dontwait)) return std::nullopt;
  bool more = first.more();
  multipart frames;
  frames.push_back(std::move(first));
  while (more) {
    zmq::message_t next;
    if (!s.recv(next, zmq::recv_flags::dontwait)) break;
    more = next.more();
    frames.push_back(std::move(next));
  }
  return frames;
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
  if (up_) up_->clear();
  if (down_) down_->clear();
  if (opts_.link && opts_.link->shapes() && !up_) {
    const auto start = steady_clock::now();
    up_.emplace(*opts_.link, 0, start);
    down_.emplace(*opts_.link, 1, start);
  }
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

bool client::send_bytes(std::string bytes) {
  if (!up_) return socket_->send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
  multipart m;
  m.emplace_back(bytes.data(), bytes.size());
  const auto now = steady_clock::now();
  up_->push(std::move(m), now);
  up_->flush(*socket_, now);
  return true;
}

result<reply> client::next_reply(steady_clock::time_point deadline) {
  for (;;) {
    const auto now = steady_clock::now();
    if (up_) up_->flush(*socket_, now);
    while (auto m = read_message(*socket_)) {
      if (!down_) {
        last_reply_bytes_ = m->empty() ? 0 : m->front().size();
        return decode_message(*m);
      }
      down_->push(std::move(*m), now);
    }
    if (down_) {
      if (auto m = down_->pop_due(now)) {
        last_reply_bytes_ = m->empty() ? 0 : m->front().size();
        return decode_message(*m);
      }
    }
    if (now >= deadline) return make_error(errc::deadline_exceeded, "no reply by the deadline");
    auto wake = deadline;
    for (const shaped_queue* q : {uplink(), downlink()})
      if (q && q->next_due()) wake = std::min(wake, std::max(*q->next_due(), now + milliseconds(1)));
    wait_readable(std::chrono::ceil<milliseconds>(wake - now));
  }
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
  if (req.request_id.empty()) req.request_id = new_request_id();
  const int attempts = 1 + std::max(0, opts_.retries);
  for (int i = 0; i < attempts; ++i) {
    if (i > 0) {
      ++req.attempt;
      ++retried_;
    }
    req.sent_unix_ns = unix_now_ns();
    std::string bytes = encode(req);
    link_observation seen{since_epoch(steady_clock::now()), {}, bytes.size(), 0, false};
    const auto deadline = steady_clock::now() + opts_.timeout;
    if (send_bytes(std::move(bytes))) {
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
