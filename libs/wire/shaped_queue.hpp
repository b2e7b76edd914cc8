// shaped_queue: the seam between the link model and a real ZeroMQ socket.
// Multipart messages pushed in pass through a link_shaper: a lost one is
// dropped at once, the others are held, in order, until their deliver_at.
// Used on both sides of a socket: outgoing messages are flush()ed to the
// socket when due (the uplink); incoming ones are push()ed as they are read
// and pop_due()d when they "arrive" (the downlink).
//
// Not thread-safe: it belongs to the thread that owns the socket, which
// drives it from its own poll loop (wake up at next_due()).
#pragma once

#include "libs/wire/link_shaper.hpp"

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <vector>
#include <zmq.hpp>

namespace loom::wire {

using multipart = std::vector<zmq::message_t>;

class shaped_queue {
 public:
  using clock = std::chrono::steady_clock;

  // `start` is the link's time zero (outage windows count from it); `stream`
  // as for link_shaper (0 uplink, 1 downlink).
  shaped_queue(link_config cfg, std::uint64_t stream, clock::time_point start);

  // Passes `msg` (its bytes = the sum of its frame sizes) through the model at
  // `now`: dropped, or held until its deliver_at.
  admission push(multipart msg, clock::time_point now);

  // The oldest held message if it is due by `now`, else nullopt.
  std::optional<multipart> pop_due(clock::time_point now);

  // Sends every message due by `now` to `s` without blocking, in order; stops
  // at the first the socket will not take (it stays first). Returns how many
  // were sent.
  std::size_t flush(zmq::socket_t& s, clock::time_point now);

  // When the oldest held message is due; nullopt when none is held.
  std::optional<clock::time_point> next_due() const;

  // Forgets the held messages (their socket is gone): counted as dropped.
  void clear();

  std::size_t held() const { return held_.size(); }
  std::uint64_t cleared() const { return cleared_; }
  const link_shaper& model() const { return shaper_; }

 private:
  struct entry {
    clock::time_point due;
    multipart msg;
  };

  link_shaper shaper_;
  clock::time_point start_;
  std::deque<entry> held_;
  std::uint64_t cleared_ = 0;
};

}  // namespace loom::wire
