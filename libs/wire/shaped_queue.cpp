#include "libs/wire/shaped_queue.hpp"

namespace loom::wire {

shaped_queue::shaped_queue(link_config cfg, std::uint64_t stream, clock::time_point start)
    : shaper_(std::move(cfg), stream), start_(start) {}

admission shaped_queue::push(multipart msg, clock::time_point now) {
  std::uint64_t bytes = 0;
  for (const auto& f : msg) bytes += f.size();
  const admission a = shaper_.admit(std::chrono::duration_cast<link_time>(now - start_), bytes);
  if (!a.dropped) held_.push_back({start_ + std::chrono::duration_cast<clock::duration>(a.deliver_at), std::move(msg)});
  return a;
}

std::optional<multipart> shaped_queue::pop_due(clock::time_point now) {
  if (held_.empty() || held_.front().due > now) return std::nullopt;
  multipart m = std::move(held_.front().msg);
  held_.pop_front();
  return m;
}

std::size_t shaped_queue::flush(zmq::socket_t& s, clock::time_point now) {
  std::size_t sent = 0;
  while (!held_.empty() && held_.front().due <= now) {
    multipart& m = held_.front().msg;
    // A multipart message goes whole or not at all: once the first frame is
    // in, ZeroMQ takes the rest (it queues atomically per message).
    for (std::size_t i = 0; i < m.size(); ++i) {
      const auto flags = zmq::send_flags::dontwait | (i + 1 < m.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      if (!s.send(m[i], flags)) {
        if (i == 0) return sent;  // HWM: try again later
        break;                    // cannot happen mid-message; drop the rest rather than spin
      }
    }
    held_.pop_front();
    ++sent;
  }
  return sent;
}

std::optional<shaped_queue::clock::time_point> shaped_queue::next_due() const {
  if (held_.empty()) return std::nullopt;
  return held_.front().due;
}

void shaped_queue::clear() {
  cleared_ += held_.size();
  held_.clear();
}

}  // namespace loom::wire
