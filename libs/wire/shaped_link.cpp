#include "libs/wire/shaped_link.hpp"

#include <algorithm>
#include <cerrno>

namespace loom::wire {
namespace {

using std::chrono::milliseconds;
using clock = std::chrono::steady_clock;

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

void wait_readable(zmq::socket_t& s, milliseconds timeout) {
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  try {
    zmq::poll(&item, 1, std::max(timeout, milliseconds(0)));
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;  // EINTR: a short wait; the caller loops on its deadline
  }
}

}  // namespace

bool send_message(zmq::socket_t& s, shaped_link* link, multipart msg) {
  if (link) {
    const auto now = clock::now();
    link->uplink().push(std::move(msg), now);
    link->uplink().flush(s, now);
    return true;
  }
  for (std::size_t i = 0; i < msg.size(); ++i) {
    const auto more = i + 1 < msg.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    if (!s.send(msg[i], zmq::send_flags::dontwait | more)) return false;  // only the first can fail (atomic)
  }
  return true;
}

std::optional<multipart> recv_message(zmq::socket_t& s, shaped_link* link, clock::time_point deadline) {
  for (;;) {
    const auto now = clock::now();
    if (link) link->uplink().flush(s, now);
    while (auto m = read_message(s)) {
      if (!link) return m;
      link->downlink().push(std::move(*m), now);
    }
    if (link)
      if (auto m = link->downlink().pop_due(now)) return m;
    if (now >= deadline) return std::nullopt;
    auto wake = deadline;
    if (link)
      for (const shaped_queue* q : {&link->uplink(), &link->downlink()})
        if (auto due = q->next_due()) wake = std::min(wake, std::max(*due, now + milliseconds(1)));
    wait_readable(s, std::chrono::ceil<milliseconds>(wake - now));
  }
}

}  // namespace loom::wire
