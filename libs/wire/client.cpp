#include "libs/wire/client.hpp"

#include "libs/status/unix_time.hpp"
#include "libs/wire/limits.hpp"
#include "loom/v1/replica.pb.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <thread>

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
    : ctx_(ctx), endpoints_(1, endpoint), endpoint_(std::move(endpoint)), curve_(true),
      server_public_z85_(std::move(server_public_z85)), mine_(std::move(mine)), opts_(std::move(opts)) {
  reconnect();
}

client::client(zmq::context_t& ctx, std::vector<std::string> endpoints, std::string server_public_z85,
               curve_keypair mine, client_options opts)
    : ctx_(ctx), endpoints_(std::move(endpoints)), endpoint_(endpoints_.empty() ? std::string() : endpoints_[0]),
      curve_(true), server_public_z85_(std::move(server_public_z85)), mine_(std::move(mine)), opts_(std::move(opts)) {
  reconnect();
}

client::client(zmq::context_t& ctx, bench_plaintext_t, std::string endpoint, client_options opts)
    : ctx_(ctx), endpoints_(1, endpoint), endpoint_(std::move(endpoint)), curve_(false), opts_(std::move(opts)) {
  reconnect();
}

void client::switch_to(std::size_t index) {
  if (index != current_) {
    current_ = index;
    endpoint_ = endpoints_[index];
    ++failovers_;
  }
  reconnect();
}

void client::watch_connection() {
  static std::atomic<std::uint64_t> next{0};
  const std::string addr = "inproc://loom-client-monitor-" + std::to_string(next++);
  if (zmq_socket_monitor(socket_->handle(), addr.c_str(),
                         ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_CLOSED) != 0)
    return;  // no monitor: the timeout alone tells a dead replica
  monitor_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::pair);
  monitor_->set(zmq::sockopt::linger, 0);
  monitor_->connect(addr);
}

void client::unwatch_connection() {
  if (!monitor_) return;
  if (socket_) (void)zmq_socket_monitor(socket_->handle(), nullptr, 0);
  monitor_.reset();
}

bool client::connection_lost() {
  if (!monitor_) return false;
  bool lost = false;
  for (;;) {
    zmq::message_t event;  // frame 1: event id (u16) + value (u32); frame 2: the endpoint
    if (!monitor_->recv(event, zmq::recv_flags::dontwait)) break;
    if (event.size() >= 2) {
      std::uint16_t id = 0;
      std::memcpy(&id, event.data(), sizeof id);
      if (id == ZMQ_EVENT_DISCONNECTED || id == ZMQ_EVENT_CONNECT_RETRIED) lost = true;
    }
    zmq::message_t where;
    if (monitor_->get(zmq::sockopt::rcvmore)) (void)monitor_->recv(where, zmq::recv_flags::dontwait);
  }
  return lost;
}

result<reply> client::call_replicated(request req) {
  // The connection is watched only while a call waits: libzmq blocks its I/O
  // thread once a monitor's unread events pass the high-water mark, which an
  // idle client's reconnect attempts to a dead replica would reach.
  in_call_ = true;
  watch_connection();
  struct unwatch {
    client& c;
    ~unwatch() {
      c.in_call_ = false;
      c.unwatch_connection();
    }
  } done{*this};
  const auto attempts = 1 + std::max(0, opts_.retries);
  const auto budget = opts_.timeout * attempts;
  const auto give_up = steady_clock::now() + budget;
  const std::size_t n = endpoints_.size();
  // Replicas that stayed silent in this call, and since when: a standby
  // naming one of them as the leader (its lease has not run out yet) is not
  // followed back there until it has had time to come back.
  std::map<std::size_t, steady_clock::time_point> silent;
  const auto rest = opts_.revisit_after;
  std::string last = "nothing sent";
  for (int i = 0;; ++i) {
    const auto now = steady_clock::now();
    if (now >= give_up) break;
    if (i > 0) {
      ++req.attempt;
      ++retried_;
    }
    req.sent_unix_ns = static_cast<std::uint64_t>(loom::unix_now_ns());
    std::string bytes = encode(req);
    link_observation seen{since_epoch(now), {}, bytes.size(), 0, false};
    const auto deadline = std::min(give_up, now + opts_.timeout);
    std::optional<std::size_t> next;  // set by a standby's NotLeader
    bool redirected = false;
    bool gone = false;  // the connection closed or was refused: the replica went away
    if (send_bytes(bytes)) {
      for (;;) {
        // In short slices, so a replica that went away is left at once.
        auto rep = next_reply(std::min(deadline, steady_clock::now() + milliseconds(10)));
        if (rep.code() == errc::deadline_exceeded) {
          if (steady_clock::now() >= deadline) break;
          if ((gone = connection_lost())) break;
          continue;
        }
        if (!rep.ok() || rep->request_id != req.request_id) {
          ++discarded_;
          continue;
        }
        if (opts_.observe) {
          seen.replied = since_epoch(steady_clock::now());
          seen.bytes_in = last_reply_bytes_;
          seen.ok = true;
          opts_.observe(seen);
        }
        if (rep->code != errc::unavailable || rep->type != not_leader_type) {
          silent.erase(current_);
          return rep;
        }
        redirected = true;
        loom::v1::NotLeader nl;
        (void)nl.ParseFromString(rep->body);
        silent.erase(current_);
        last = endpoint_ + " is a standby (" + nl.replica() + ")" +
               (nl.leader().empty() ? std::string("; no replica leads yet")
                                    : "; it names " + nl.leader() + " at " + nl.leader_endpoint() + " as the leader");
        auto it = std::find(endpoints_.begin(), endpoints_.end(), nl.leader_endpoint());
        if (it != endpoints_.end()) {
          const std::size_t k = static_cast<std::size_t>(it - endpoints_.begin());
          const auto s = silent.find(k);
          if (k != current_ && (s == silent.end() || steady_clock::now() - s->second >= rest)) next = k;
        }
        break;
      }
    }
    if (!redirected) {
      if (opts_.observe) {
        seen.replied = since_epoch(steady_clock::now());
        opts_.observe(seen);
      }
      // An attempt the call's budget cut short says less than the answer before it.
      const bool cut = !gone && deadline == give_up;
      if (!cut || last == "nothing sent") {
        silent.try_emplace(current_, steady_clock::now());
        last = gone ? "the connection to " + endpoint_ + " was lost"
                    : "no reply from " + endpoint_ + " within " + std::to_string(opts_.timeout.count()) + " ms";
      }
    }
    if (!next) {
      // Nobody to follow: a takeover is under way (or the named leader went
      // silent). Pause a little when every replica has been asked, then the next.
      if (redirected || silent.size() >= n) {
        const auto pause = std::min<steady_clock::duration>(milliseconds(20), give_up - steady_clock::now());
        if (pause > steady_clock::duration::zero()) std::this_thread::sleep_for(pause);
      }
      next = (current_ + 1) % n;
    }
    switch_to(*next);
  }
  return make_error(errc::unavailable, "no replica of " + std::to_string(n) + " answered as the leader within " +
                                           std::to_string(std::chrono::duration_cast<milliseconds>(budget).count()) +
                                           " ms (last: " + last + ")");
}

void client::reconnect() {
  unwatch_connection();
  socket_.reset();  // linger 0 (apply_common_options): queued requests die with it
  socket_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  apply_common_options(*socket_);
  if (curve_) make_curve_client(*socket_, mine_, server_public_z85_);
  if (in_call_) watch_connection();
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
  if (endpoints_.size() > 1) return call_replicated(std::move(req));
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
