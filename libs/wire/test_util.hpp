// Helpers shared by the wire_tests binary only (never linked into loom::wire):
// temp dirs, socket timeouts, a CURVE fixture with a ZAP handler, a router
// served on a background thread, and a socket-monitor reader.
#pragma once

#include "libs/wire/curve.hpp"
#include "libs/wire/limits.hpp"
#include "libs/wire/server.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdlib.h>
#include <string>
#include <thread>
#include <zmq.hpp>

namespace loom::wire::test {

inline std::string temp_dir() {
  char tmpl[] = "/tmp/loom-wire-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

// Every socket a test makes directly: bounded waits, no linger.
inline void bounded(zmq::socket_t& s, int ms = 2000) {
  apply_common_options(s);
  s.set(zmq::sockopt::rcvtimeo, ms);
  s.set(zmq::sockopt::sndtimeo, ms);
  s.set(zmq::sockopt::linger, 0);
}

// A context with a ZAP handler (domain "loom") admitting `alice` only. The
// handler is built first and destroyed before the context.
struct curve_fixture {
  zmq::context_t ctx;
  curve_keypair server = generate_keypair();
  curve_keypair alice = generate_keypair();
  std::string domain = "loom";
  std::unique_ptr<zap_handler> zap =
      std::make_unique<zap_handler>(ctx, allow_list{{alice.public_z85, "alice"}}, domain);
};

// Runs `handle` for every message `srv` receives, on its own thread, until
// destroyed. The router belongs to that thread meanwhile.
class served {
 public:
  using handler = std::function<void(router_server&, const router_server::incoming&)>;
  served(router_server& srv, handler handle) : thread_([this, &srv, h = std::move(handle)] {
      while (!stop_) {
        if (auto in = srv.poll(std::chrono::milliseconds(20))) h(srv, *in);
      }
    }) {}
  ~served() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Handshake outcome reported by a socket monitor.
struct handshake_event {
  std::uint16_t event = 0;  // ZMQ_EVENT_*
  std::uint32_t value = 0;  // ZAP status code for HANDSHAKE_FAILED_AUTH
};

constexpr int handshake_events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;

// Starts monitoring `s` for handshake events; returns the PAIR socket that
// receives them. REQUIRES: before s connects; `name` unique in the context.
inline std::unique_ptr<zmq::socket_t> monitor(zmq::context_t& ctx, zmq::socket_t& s, const std::string& name) {
  const std::string ep = "inproc://monitor-" + name;
  REQUIRE(zmq_socket_monitor(s.handle(), ep.c_str(), handshake_events) == 0);
  auto pair = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::pair);
  bounded(*pair);
  pair->connect(ep);
  return pair;
}

// Reads one monitor event without blocking (ZeroMQ 4.x format: frame 1 =
// uint16 event + uint32 value, frame 2 = endpoint).
inline std::optional<handshake_event> read_event(zmq::socket_t& pair) {
  zmq::message_t head, addr;
  if (!pair.recv(head, zmq::recv_flags::dontwait)) return std::nullopt;
  if (head.more()) (void)pair.recv(addr);
  handshake_event ev;
  if (head.size() < 6) return ev;
  std::memcpy(&ev.event, head.data(), 2);
  std::memcpy(&ev.value, static_cast<const char*>(head.data()) + 2, 4);
  return ev;
}

// Waits up to `timeout` for the first handshake event on `pair`.
inline std::optional<handshake_event> wait_event(zmq::socket_t& pair, std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{pair.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, timeout) <= 0) return std::nullopt;
  return read_event(pair);
}

}  // namespace loom::wire::test
