#include "libs/wire/limits.hpp"

namespace loom::wire {

void apply_common_options(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::maxmsgsize, max_message_bytes);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::sndhwm, default_hwm);
  socket.set(zmq::sockopt::rcvhwm, default_hwm);
}

}  // namespace loom::wire
