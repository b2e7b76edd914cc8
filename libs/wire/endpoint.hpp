// TCP endpoints as ZeroMQ takes them, checked before a socket sees them: a
// service's bind option or a peer's address from a request is refused with
// the caller's wording instead of failing inside zmq (or binding somewhere
// unexpected). Stateless; any thread.
#pragma once

#include <string_view>

namespace loom::wire {

enum class endpoint_use { connect, bind };

// "tcp://HOST:PORT" with a non-empty HOST and PORT 1..65535 (decimal, no
// sign). For bind, HOST may also be '*' (every interface) and PORT '*' (a
// free one, as ZeroMQ picks it); for connect neither is an address.
bool valid_tcp_endpoint(std::string_view endpoint, endpoint_use use);

}  // namespace loom::wire
