// Domain structs of the chunked bulk transfer (mirrors loom.v1.Bulk* without
// protobuf): what bulk_sender produces, bulk_receiver consumes and
// bulk_transport converts to and from the wire. Plain values.
#pragma once

#include "libs/crypto/hash.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::wire {

// 1 MiB: large enough that per-chunk overhead (header, SHA-256, ack, state
// write) is small, small enough that a re-send is cheap and 8 in flight fit easily.
inline constexpr std::uint32_t default_chunk_bytes = 1u << 20;
// 64 MiB: a receiver holds one chunk in memory per message; refuse more.
inline constexpr std::uint32_t max_chunk_bytes = 64u << 20;
// Transfer ids are opaque tokens chosen by the sender; bounded to keep maps small.
inline constexpr std::size_t max_transfer_id_bytes = 64;

// Sender -> receiver: what is coming. chunk_count == ceil(total_bytes / chunk_bytes).
struct bulk_offer {
  std::string transfer_id;
  std::string name;  // final file name inside the receiver's directory
  std::uint64_t total_bytes = 0;
  std::uint32_t chunk_bytes = default_chunk_bytes;
  std::uint32_t chunk_count = 0;
  crypto::digest sha256{};  // of the whole object
};

// Receiver -> sender: the chunk indices still missing (ascending); complete
// when the object is already in place under its final name.
struct bulk_need {
  std::string transfer_id;
  std::vector<std::uint32_t> missing;
  bool complete = false;
};

// Header in front of one chunk's raw bytes. offset == index * chunk_bytes.
struct bulk_chunk_header {
  std::string transfer_id;
  std::uint32_t index = 0;
  std::uint64_t offset = 0;
  crypto::digest sha256{};  // of this chunk's bytes
};

// Receiver's verdict on one chunk.
struct bulk_ack {
  std::string transfer_id;
  std::uint32_t index = 0;
  bool ok = false;
  errc code = errc::ok;  // why not ok
  std::string reason;
  bool fatal = false;     // transfer abandoned by the receiver; a re-send cannot help
  bool complete = false;  // this chunk completed the object (final file in place)
};

// Number of chunks of `chunk_bytes` needed for `total_bytes` (0 for an empty object).
inline std::uint64_t chunk_count_for(std::uint64_t total_bytes, std::uint32_t chunk_bytes) {
  return chunk_bytes == 0 ? 0 : (total_bytes + chunk_bytes - 1) / chunk_bytes;
}

}  // namespace loom::wire
