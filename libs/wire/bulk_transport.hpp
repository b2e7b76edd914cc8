// Bulk transfer over ZeroMQ: send_file drives a caller-owned, connected DEALER
// (CURVE etc. configured by the caller); serve_bulk_message is what a ROUTER
// owner calls for bulk frames. Both run on the thread that owns the socket.
//
// Framing (the ROUTER's routing-id frame is stripped by the owner before
// serve_bulk_message and put back in front of the reply):
//   request  [ "loom.v1.BulkOffer"    ][ BulkOffer ]
//            [ "loom.v1.BulkChunk"    ][ BulkChunk ][ raw chunk bytes ]
//   reply    [ "loom.v1.BulkNeed"     ][ BulkNeed ]      status set when the offer is refused
//            [ "loom.v1.BulkChunkAck" ][ BulkChunkAck ]  one per chunk
//            [ "loom.v1.Status"       ][ Status ]        frames not understood at all
// Frame 0 is the message's full protobuf name, frame 1 the serialized message.
//
// Sender: offer -> need -> up to `window` chunks in flight -> one ack each;
// a bad ack re-sends that chunk (at most max_attempts sends, then corruption);
// no reply within reply_timeout -> unavailable. A later send_file of the same
// file resumes: the receiver asks only for chunks it has not verified.
#pragma once

#include "libs/wire/bulk_receiver.hpp"
#include "libs/wire/bulk_types.hpp"
#include "libs/wire/shaped_link.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

namespace loom::wire {

inline constexpr std::string_view bulk_offer_type = "loom.v1.BulkOffer";
inline constexpr std::string_view bulk_chunk_type = "loom.v1.BulkChunk";
inline constexpr std::string_view bulk_need_type = "loom.v1.BulkNeed";
inline constexpr std::string_view bulk_ack_type = "loom.v1.BulkChunkAck";
inline constexpr std::string_view bulk_status_type = "loom.v1.Status";

struct send_options {
  std::uint32_t chunk_bytes = default_chunk_bytes;
  // 8 x 1 MiB in flight hides the receiver's per-chunk hash + fsync and a
  // LAN round trip while bounding what a re-send or a dead peer can cost.
  std::uint32_t window = 8;
  // Sends of one chunk before giving up: a link that corrupts 5 times in a row is broken.
  std::uint32_t max_attempts = 5;
  // No reply for this long -> unavailable. Covers the receiver's whole-file
  // hash after the last chunk (~1-2 s per GiB).
  std::chrono::milliseconds reply_timeout{10000};
  // Stop after this many first sends (0 = no limit); the result then has
  // complete == false. For tests and for spreading a transfer over calls.
  std::uint32_t max_chunks = 0;
  // Transfer id; empty = random.
  std::string transfer_id;
  // Weak-network emulation: when set, offers and chunks cross this link's
  // uplink and replies its downlink (README "Link shaper"). The caller owns
  // it and keeps it across reconnects (forget() when replacing the socket),
  // so a transfer cut by an outage resumes on the same emulated link.
  shaped_link* link = nullptr;
  // The file is a sealed-pieces file opened with this codec (bulk_pieces.hpp;
  // its piece size must be chunk_bytes). The caller keeps it alive.
  const bulk_piece_codec* codec = nullptr;
  // TEST ONLY: when it returns true for (index, attempt >= 1), one byte of that
  // send's data is flipped (the header keeps the true SHA-256).
  std::function<bool(std::uint32_t index, std::uint32_t attempt)> corrupt_chunk;
};

struct transfer_stats {
  std::uint64_t chunks_sent = 0;     // chunk sends, re-sends included
  std::uint64_t chunks_resent = 0;   // of those, re-sends after a bad ack
  std::uint64_t bytes_sent = 0;      // raw chunk bytes, re-sends included
  std::uint64_t chunks_skipped = 0;  // already verified on the receiver
  bool complete = false;             // false only when max_chunks stopped early
};

// Sends the file at `path` as `name`. Errors: invalid_argument / not_found
// for the local file or a refused offer; unavailable on timeout or socket
// failure; corruption when a chunk keeps failing or the receiver's
// whole-file check fails. REQUIRES: `dealer` is a connected DEALER whose
// replies are not consumed by anyone else meanwhile.
result<transfer_stats> send_file(zmq::socket_t& dealer, const std::string& path, const std::string& name,
                                 const send_options& options = {});

// True when frame 0 names a bulk request (so a ROUTER owner can dispatch).
bool is_bulk_request(const std::vector<zmq::message_t>& frames);

// Answers one bulk request (`frames` without the routing id) into `reply`
// (cleared first; always 2 frames). Never throws for bad input.
void serve_bulk_message(bulk_receiver& receiver, const std::vector<zmq::message_t>& frames,
                        std::vector<std::string>& reply);

}  // namespace loom::wire
