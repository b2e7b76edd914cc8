#include "libs/wire/server.hpp"

#include "libs/wire/limits.hpp"

#include <array>
#include <vector>

namespace loom::wire {

router_server::router_server(zmq::context_t& ctx, const curve_keypair& server_key, std::string zap_domain,
                             std::string bind_endpoint)
    : router_server(ctx, &server_key, std::move(zap_domain), std::move(bind_endpoint)) {}

router_server::router_server(zmq::context_t& ctx, bench_plaintext_t, std::string bind_endpoint)
    : router_server(ctx, nullptr, std::string(), std::move(bind_endpoint)) {}

router_server::router_server(zmq::context_t& ctx, const curve_keypair* server_key, std::string zap_domain,
                             std::string bind_endpoint)
    : socket_(ctx, zmq::socket_type::router) {
  apply_common_options(socket_);
  // Report unroutable replies (peer gone) as send() == false instead of
  // dropping them silently, so sent() counts what was really queued.
  socket_.set(zmq::sockopt::router_mandatory, 1);
  if (server_key) make_curve_server(socket_, *server_key, zap_domain);
  socket_.bind(bind_endpoint);
  endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
}

std::optional<router_server::incoming> router_server::poll(std::chrono::milliseconds timeout, int extra_fd,
                                                           bool* extra_ready) {
  if (extra_ready) *extra_ready = false;
  std::array<zmq::pollitem_t, 2> items = {{{socket_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, extra_fd, ZMQ_POLLIN, 0}}};
  try {
    zmq::poll(items.data(), extra_fd >= 0 ? 2 : 1, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return std::nullopt;  // a signal: the caller's loop polls again
    throw;  // ETERM and friends: the caller misused the context
  }
  if (extra_ready && extra_fd >= 0) *extra_ready = (items[1].revents & ZMQ_POLLIN) != 0;
  if ((items[0].revents & ZMQ_POLLIN) == 0) return std::nullopt;
  return receive_one();
}

router_server::incoming router_server::receive_one() {
  std::vector<zmq::message_t> kept;
  std::size_t frames = 0;
  zmq::message_t part;
  // poll said readable, and a multipart message arrives whole, so these
  // non-blocking reads see every frame of one message.
  while (socket_.recv(part, zmq::recv_flags::dontwait)) {
    ++frames;
    const bool more = part.more();
    if (kept.size() < max_kept_frames) kept.push_back(std::move(part));
    if (!more) break;
  }

  incoming in;
  in.frames = frames;
  ++received_;
  if (!kept.empty()) in.identity = kept[0].to_string();
  if (kept.size() >= 2) in.peer_principal = peer_user_id(kept[1]);
  if (frames != 2) {
    in.req = make_error(errc::invalid_argument, "expected 2 frames ([routing id][envelope]), got " +
                                                    std::to_string(frames));
  } else {
    in.req = decode_request(kept[1].data(), kept[1].size(), &in.request_id);
  }
  if (!in.req) ++malformed_;
  return in;
}

bool router_server::send(const std::string& identity, const reply& rep) {
  const std::string payload = encode(rep);
  try {
    if (!socket_.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      return false;  // EAGAIN: the peer is over its HWM
    if (!socket_.send(zmq::buffer(payload), zmq::send_flags::dontwait)) return false;
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return false;  // peer gone (router_mandatory)
    throw;
  }
  ++sent_;
  return true;
}

}  // namespace loom::wire
