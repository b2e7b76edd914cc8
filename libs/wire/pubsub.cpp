#include "libs/wire/pubsub.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/wire/limits.hpp"
#include "loom/v1/envelope.pb.h"

#include <vector>

namespace loom::wire {

publisher::publisher(zmq::context_t& ctx, const curve_keypair& server_key, std::string zap_domain,
                     std::string bind_endpoint, std::string source)
    : socket_(ctx, zmq::socket_type::pub), source_(std::move(source)) {
  apply_common_options(socket_);
  make_curve_server(socket_, server_key, zap_domain);
  socket_.bind(bind_endpoint);
  endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
}

void publisher::publish(std::string_view topic, std::string_view type, std::string_view body) {
  v1::Event ev;
  ev.set_topic(std::string(topic));
  ev.set_type(std::string(type));
  ev.set_body(std::string(body));
  ev.set_source(source_);
  ev.set_unix_ns(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                loom::wall_now().time_since_epoch())
                                                .count()));
  const std::string bytes = ev.SerializeAsString();
  // PUB never blocks: over-HWM subscribers simply miss the event.
  socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  socket_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  ++published_;
}

subscriber::subscriber(zmq::context_t& ctx, std::string endpoint, std::string server_public_z85,
                       const curve_keypair& mine)
    : socket_(ctx, zmq::socket_type::sub) {
  apply_common_options(socket_);
  make_curve_client(socket_, mine, server_public_z85);
  socket_.connect(endpoint);
}

void subscriber::subscribe(std::string_view prefix) { socket_.set(zmq::sockopt::subscribe, prefix); }

result<event> subscriber::recv(std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  int ready = 0;
  try {
    ready = zmq::poll(&item, 1, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;  // EINTR: report as a timeout; the caller polls again
  }
  if (ready == 0)
    return make_error(errc::deadline_exceeded, "no event within " + std::to_string(timeout.count()) + " ms");

  std::vector<zmq::message_t> frames;  // at most 2 kept; extra frames only counted
  std::size_t count = 0;
  zmq::message_t part;
  while (socket_.recv(part, zmq::recv_flags::dontwait)) {
    ++count;
    const bool more = part.more();
    if (frames.size() < 2) frames.push_back(std::move(part));
    if (!more) break;
  }
  ++received_;
  auto bad = [this](std::string why) {
    ++malformed_;
    return make_error(errc::invalid_argument, std::move(why));
  };
  if (count != 2) return bad("event of " + std::to_string(count) + " frames, expected 2 ([topic][Event])");
  v1::Event ev;
  if (!ev.ParseFromArray(frames[1].data(), static_cast<int>(frames[1].size())))
    return bad("not a valid loom.v1.Event (" + std::to_string(frames[1].size()) + " bytes)");
  if (ev.topic() != frames[0].to_string_view())
    return bad("topic frame '" + frames[0].to_string() + "' does not match event topic '" + ev.topic() + "'");
  return event{std::move(*ev.mutable_topic()), std::move(*ev.mutable_type()), std::move(*ev.mutable_body()),
               std::move(*ev.mutable_source()), ev.unix_ns()};
}

}  // namespace loom::wire
