// client: the caller side of request/reply. One DEALER (CURVE client) to one
// service endpoint, with Lazy Pirate reliability (zguide ch. 4): wait up to a
// timeout, then close the socket (dropping whatever it queued), reconnect and
// resend the same request_id with attempt+1, a bounded number of times.
//
// With client_options::link set, requests cross an emulated uplink and
// replies an emulated downlink (shaped_link; see README "Link shaper"):
// a lost request or reply then looks like a dead peer, and Lazy Pirate retries.
//
// Not thread-safe: one thread owns a client (its socket belongs to it).
#pragma once

#include "libs/wire/curve.hpp"
#include "libs/wire/envelope.hpp"
#include "libs/wire/link_monitor.hpp"
#include "libs/wire/shaped_link.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

namespace loom::wire {

struct client_options {
  // How long one attempt waits for its reply. 2 s: services answer in
  // milliseconds; anything slower is a dead or wedged peer.
  std::chrono::milliseconds timeout{2000};
  // Extra attempts after the first: 2 -> up to 3 sends in all.
  int retries = 2;
  // Weak-network emulation: requests go through a link_shaper of this config
  // (stream 0) and replies through another (stream 1: its own loss and jitter,
  // the same outages). Outage windows count from the client's construction.
  // Unset = the real network only. Services fill it from LOOM_LINK_SHAPE
  // (link_config_from_env); tests set it directly.
  std::optional<link_config> link{};
  // Called after every attempt of call() with its steady-clock times and
  // sizes (ok = a matching reply came): feed a link_monitor with it.
  std::function<void(const link_observation&)> observe{};
  // A replicated service (several endpoints): a replica that went silent or
  // away is asked again only this long after, even when a standby still
  // names it the leader (its lease has not run out yet).
  std::chrono::milliseconds revisit_after{250};
};

// The reply type of a standby replica (issue 30): code unavailable, body a
// loom.v1.NotLeader naming the leader and its endpoint when one is known.
inline constexpr std::string_view not_leader_type = "loom.v1.NotLeader";

class client {
 public:
  // Connects (lazily, as ZeroMQ does) to `endpoint` with CURVE, trusting the
  // server key `server_public_z85` and presenting `mine`.
  client(zmq::context_t& ctx, std::string endpoint, std::string server_public_z85, curve_keypair mine,
         client_options opts = {});
  // A replicated service: the same CURVE identity behind `endpoints`, one of
  // them leading. call() goes to the replica that answered last; a standby's
  // NotLeader sends it to the leader it names (only one of `endpoints`, never
  // an address a reply made up); a replica whose connection drops (its
  // process died) is left at once, one that stays silent with its connection
  // up after `timeout`; while no replica leads (a takeover under way) it
  // waits a little and asks again — all under the same request_id, until
  // timeout x (retries + 1) has passed. A live but slow leader is waited for,
  // never hopped away from. One endpoint behaves as above.
  client(zmq::context_t& ctx, std::vector<std::string> endpoints, std::string server_public_z85, curve_keypair mine,
         client_options opts = {});
  // Plaintext DEALER: benchmarks and tests only (see bench_plaintext_t).
  client(zmq::context_t& ctx, bench_plaintext_t, std::string endpoint, client_options opts = {});

  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // Sends `req` and returns its reply, retrying as described above. Fills in
  // request_id (if empty) and sent_unix_ns. Replies whose request_id is not
  // this request's (late replies to earlier requests) are discarded.
  // Errors: unavailable "no reply from <endpoint> after N attempts";
  // invalid_argument, at once and nothing sent, for a body over max_body_bytes.
  // A reply with a non-ok status is still a successful result<reply>.
  result<reply> call(request req);

  // Pipelining (benchmarks): send without waiting, then collect replies in
  // arrival order with recv(). No retries, no request_id matching.
  // send_async returns false when the socket would block (over its HWM);
  // on a shaped link it is always true (a lost request is sent, then lost),
  // and held requests move on only while send_async, recv or call run.
  bool send_async(const request& req);
  // deadline_exceeded when nothing arrives within `timeout`; invalid_argument
  // for an undecodable reply.
  result<reply> recv(std::chrono::milliseconds timeout);

  const std::string& endpoint() const { return endpoint_; }
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  std::uint64_t failovers() const { return failovers_; }  // moves to another replica
  std::uint64_t retried() const { return retried_; }      // resends after a timeout
  std::uint64_t discarded() const { return discarded_; }  // stale or undecodable replies dropped
  // The emulated links (nullptr when not shaped): their counters, for tests.
  const shaped_queue* uplink() const { return link_ ? &link_->uplink() : nullptr; }
  const shaped_queue* downlink() const { return link_ ? &link_->downlink() : nullptr; }

 private:
  void reconnect();  // close the socket (linger 0) and open a fresh one
  bool send_bytes(const std::string& bytes);  // through the uplink when shaped
  // The next reply (any request_id) by `deadline`, moving shaped messages
  // along meanwhile; deadline_exceeded when none; sets last_reply_bytes_.
  result<reply> next_reply(std::chrono::steady_clock::time_point deadline);

  // call() for several replicas (see the constructor).
  result<reply> call_replicated(request req);
  void switch_to(std::size_t index);
  // Replica sets: a monitor of the socket's connection (inproc PAIR) while a
  // call waits, so a replica that went away (its process killed: the
  // connection closed or refused) is left at once instead of after timeout.
  void watch_connection();
  void unwatch_connection();
  bool connection_lost();  // drains the monitor's events since the last call

  zmq::context_t& ctx_;
  std::vector<std::string> endpoints_;
  std::size_t current_ = 0;
  std::string endpoint_;  // endpoints_[current_]
  const bool curve_;
  const std::string server_public_z85_;
  const curve_keypair mine_;
  const client_options opts_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::unique_ptr<zmq::socket_t> monitor_;  // replica sets, during call() only
  bool in_call_ = false;
  std::optional<shaped_link> link_;
  std::size_t last_reply_bytes_ = 0;
  std::uint64_t retried_ = 0, discarded_ = 0, failovers_ = 0;
};

}  // namespace loom::wire
