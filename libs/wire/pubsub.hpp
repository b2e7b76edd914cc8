// Events over PUB/SUB. A publisher binds a PUB socket (CURVE server, so the
// ZAP allow list decides who may subscribe); a subscriber connects a SUB
// socket (CURVE client). Each event is two frames:
//   [topic][loom.v1.Event bytes]
// The topic frame lets SUB filter by prefix without decoding. Delivery is
// best-effort (PUB drops for slow or absent subscribers): events tell, they
// never carry state that must arrive.
// Not thread-safe: each object belongs to one thread.
#pragma once

#include "libs/wire/curve.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <zmq.hpp>

namespace loom::wire {

struct event {
  std::string topic;   // e.g. "job.started"
  std::string type;    // full name of `body`'s message
  std::string body;
  std::string source;  // publishing service / node
  std::uint64_t unix_ns = 0;
};

class publisher {
 public:
  // REQUIRES: a zap_handler for `ctx` with domain `zap_domain` exists.
  // Throws zmq::error_t if the bind fails.
  publisher(zmq::context_t& ctx, const curve_keypair& server_key, std::string zap_domain,
            std::string bind_endpoint, std::string source);

  const std::string& endpoint() const { return endpoint_; }

  // Publishes now (never blocks; dropped for subscribers over their HWM).
  void publish(std::string_view topic, std::string_view type, std::string_view body);

  std::uint64_t published() const { return published_; }

 private:
  zmq::socket_t socket_;
  std::string endpoint_;
  std::string source_;
  std::uint64_t published_ = 0;
};

class subscriber {
 public:
  subscriber(zmq::context_t& ctx, std::string endpoint, std::string server_public_z85,
             const curve_keypair& mine);

  // Receives events whose topic starts with `prefix` ("" = all). Subscribing
  // takes effect after the connection is up: the first events may be missed.
  void subscribe(std::string_view prefix);

  // Next event: deadline_exceeded when none arrives within `timeout`;
  // invalid_argument for a malformed one (counted; the next recv goes on).
  result<event> recv(std::chrono::milliseconds timeout);

  std::uint64_t received() const { return received_; }
  std::uint64_t malformed() const { return malformed_; }

 private:
  zmq::socket_t socket_;
  std::uint64_t received_ = 0, malformed_ = 0;
};

}  // namespace loom::wire
