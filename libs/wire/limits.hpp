// Size caps and the socket options every EdgeLoom ZeroMQ socket gets.
// Stateless; apply_common_options touches only the socket it is given, so it
// runs on whichever thread owns that socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <zmq.hpp>

namespace loom::wire {

// Largest single frame a socket accepts (ZMQ_MAXMSGSIZE). Bulk chunks are at
// most 1 MiB and the largest protobuf header is a few KiB, so 64 MiB leaves
// ample room; without a cap a hostile peer could announce a multi-gigabyte
// frame and make us allocate it. A frame over the cap drops the connection.
constexpr std::int64_t max_message_bytes = std::int64_t{64} << 20;

// Largest Envelope.body accepted by decode_request/decode_reply. Bodies are
// control messages and headers; bulk data travels as raw frames (bulk*), so
// a 16 MiB body is a bug or an attack, not a legitimate request.
constexpr std::size_t max_body_bytes = std::size_t{16} << 20;

// Send/receive high-water mark in messages per peer. 1000 (libzmq's default)
// is 4x the benchmark's 256-request pipelining window, so a burst of replies
// is never dropped by a ROUTER, and it bounds what one slow peer can queue.
constexpr int default_hwm = 1000;

// Sets ZMQ_MAXMSGSIZE = max_message_bytes, linger 0 (a closed socket drops
// unsent messages: request/reply recovers by retrying, and shutdown never
// hangs on a dead peer) and send/receive HWMs = default_hwm.
// REQUIRES: called before bind/connect (options apply to later connections).
void apply_common_options(zmq::socket_t& socket);

}  // namespace loom::wire
