// shaped_link: both directions of one socket's emulated link, and the two
// calls a socket owner uses instead of raw send/recv to go through it.
// Requests and chunks we send cross the uplink (stream 0); what we read
// crosses the downlink (stream 1) before the caller sees it. The link
// outlives sockets: after a reconnect, forget() what was on the wire and
// keep the link (its outage schedule counts from `start`).
//
// Not thread-safe: it belongs to the thread that owns the socket(s) it shapes.
#pragma once

#include "libs/wire/shaped_queue.hpp"

#include <chrono>
#include <optional>

namespace loom::wire {

class shaped_link {
 public:
  using clock = std::chrono::steady_clock;

  shaped_link(const link_config& cfg, clock::time_point start) : up_(cfg, 0, start), down_(cfg, 1, start) {}

  // Drops what either direction holds (their socket is gone).
  void forget() {
    up_.clear();
    down_.clear();
  }

  shaped_queue& uplink() { return up_; }
  shaped_queue& downlink() { return down_; }
  const shaped_queue& uplink() const { return up_; }
  const shaped_queue& downlink() const { return down_; }

 private:
  shaped_queue up_, down_;
};

// Sends `msg` on `s`: through `link` when it is not null (held or dropped,
// then whatever is due is flushed; always true), else at once without
// blocking (false when the socket would block; nothing is sent then).
bool send_message(zmq::socket_t& s, shaped_link* link, multipart msg);

// The next whole message from `s` by `deadline`, after it crossed `link`'s
// downlink when `link` is not null (held uplink messages are flushed
// meanwhile); nullopt at the deadline.
std::optional<multipart> recv_message(zmq::socket_t& s, shaped_link* link,
                                      std::chrono::steady_clock::time_point deadline);

}  // namespace loom::wire
