// router_server: the service side of request/reply. Owns one ROUTER socket
// (a CURVE server behind the context's zap_handler), turns each multipart
// message into an `incoming` (a decoded request or the reason it is not one)
// and sends replies back by routing identity.
//
// Not thread-safe: one thread (a gateway actor or I/O thread) owns it, as
// ZeroMQ sockets belong to one thread. It may be constructed on one thread and
// handed to another before first use.
#pragma once

#include "libs/wire/curve.hpp"
#include "libs/wire/envelope.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <zmq.hpp>

namespace loom::wire {

class router_server {
 public:
  // One message off the ROUTER. `req` is the decoded request, or
  // invalid_argument when the message was malformed (wrong frame count,
  // empty or undecodable payload); the caller should answer with
  // error_reply(request_id, ...) and keep serving.
  struct incoming {
    std::string identity;        // ROUTER routing id: pass to send()
    std::string peer_principal;  // ZAP user id (the client's key name); "" in plaintext
    std::string request_id;      // when the payload parsed as an Envelope, even if invalid
    result<request> req = make_error(errc::invalid_argument, "no message");
    std::size_t frames = 0;      // frames received, routing id included
  };

  // Binds a CURVE ROUTER to `bind_endpoint` ("tcp://127.0.0.1:*" or ":0"
  // picks a port; see endpoint()). REQUIRES: a zap_handler for `ctx` with
  // domain `zap_domain` exists. Throws zmq::error_t if the bind fails.
  router_server(zmq::context_t& ctx, const curve_keypair& server_key, std::string zap_domain,
                std::string bind_endpoint);
  // Plaintext ROUTER: benchmarks and tests only (see bench_plaintext_t).
  router_server(zmq::context_t& ctx, bench_plaintext_t, std::string bind_endpoint);

  router_server(const router_server&) = delete;
  router_server& operator=(const router_server&) = delete;

  // The bound endpoint with the real port, e.g. "tcp://127.0.0.1:40123".
  const std::string& endpoint() const { return endpoint_; }

  // Waits up to `timeout` for a message on the ROUTER or for `extra_fd` (e.g.
  // an eventfd used to wake the loop) to become readable. Returns one message
  // if one arrived, else nullopt; *extra_ready tells whether extra_fd fired
  // (the caller drains it). Never throws on bad input.
  std::optional<incoming> poll(std::chrono::milliseconds timeout, int extra_fd = -1,
                               bool* extra_ready = nullptr);

  // Sends `rep` to the peer `identity`. Never blocks: a reply to a peer that
  // is gone or over its HWM is dropped (its client retries). Returns whether
  // it was queued.
  bool send(const std::string& identity, const reply& rep);

  std::uint64_t received() const { return received_; }    // messages, malformed included
  std::uint64_t malformed() const { return malformed_; }
  std::uint64_t sent() const { return sent_; }

 private:
  // Frames kept per message: [routing id][payload]; anything more is only
  // counted, so a peer cannot make us hold a million tiny frames.
  static constexpr std::size_t max_kept_frames = 3;

  router_server(zmq::context_t& ctx, const curve_keypair* server_key, std::string zap_domain,
                std::string bind_endpoint);
  incoming receive_one();

  zmq::socket_t socket_;
  std::string endpoint_;
  std::uint64_t received_ = 0, malformed_ = 0, sent_ = 0;
};

}  // namespace loom::wire
