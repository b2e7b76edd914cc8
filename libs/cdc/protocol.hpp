// The sync protocol's control messages, as domain structs, and their codec.
// The only file that sees the JSON library for messages; chunk bytes never
// travel here: they go as packs through the foundation's bulk transfer
// (libs/wire/bulk_transport.hpp, loom.v1.Bulk*). Stateless; thread-safe.
//
// Frames on the client's DEALER (the ROUTER's routing id is not shown):
//   client -> server   [type][request JSON]
//   server -> client   [type][status JSON][payload...]
//   ManifestRequest {dataset}                  -> Manifest  [status][summary manifest JSON]
//   ChunksRequest   {dataset, root, paths[]}   -> Chunks    [status][file entry JSON]...   (one per path)
//   PackRequest     {dataset, name, chunks[]}  -> bulk BulkOffer/BulkChunk requests from the server,
//                                                 answered by the client's bulk_receiver, then
//                                                 PackDone  [status + bulk stats JSON]
//   Bye             {}                         -> (none; the server ends the session)
//   anything the server cannot parse           -> Error     [status]
// A pack is the requested chunks' bytes concatenated in request order; its
// name is derived from the list, so a re-request after an interruption offers
// the very same object and the bulk transfer resumes it.
#pragma once

#include "libs/crypto/hash.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/bulk_transport.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::cdc {

inline constexpr std::string_view manifest_request_type = "loom.cdc.ManifestRequest";
inline constexpr std::string_view chunks_request_type = "loom.cdc.ChunksRequest";
inline constexpr std::string_view pack_request_type = "loom.cdc.PackRequest";
inline constexpr std::string_view bye_type = "loom.cdc.Bye";
inline constexpr std::string_view manifest_reply_type = "loom.cdc.Manifest";
inline constexpr std::string_view chunks_reply_type = "loom.cdc.Chunks";
inline constexpr std::string_view pack_done_type = "loom.cdc.PackDone";
inline constexpr std::string_view error_reply_type = "loom.cdc.Error";

// A pack holds at most this many chunks and bytes: the request stays ~300 KB
// and the server's scratch copy of a pack stays bounded per session.
inline constexpr std::size_t max_pack_chunks = 4096;
inline constexpr std::uint64_t max_pack_bytes = 64u << 20;
// Paths per ChunksRequest: bounds the reply (frames of ~85 bytes per chunk).
inline constexpr std::size_t max_paths_per_request = 1024;

struct manifest_request {
  std::string dataset;
};

struct chunks_request {
  std::string dataset;
  crypto::digest root{};  // the dataset root the client saw; conflict if it moved
  std::vector<std::string> paths;
};

struct pack_request {
  std::string dataset;
  std::string name;  // == pack_name(chunks)
  std::vector<crypto::digest> chunks;
};

struct pack_done {
  std::string name;
  wire::transfer_stats bulk;  // the server's side of the bulk transfer
};

// invalid_argument unless 1..128 of [A-Za-z0-9._-] not starting with '.'.
status valid_dataset_name(std::string_view name);

// "pack-" + the first 40 hex digits of SHA-256 over the chunk ids in order.
std::string pack_name(const std::vector<crypto::digest>& chunks);

std::string encode(const manifest_request& m);
std::string encode(const chunks_request& m);
std::string encode(const pack_request& m);
std::string encode_status(const status& s);
std::string encode(const status& s, const pack_done& m);

// invalid_argument naming the problem for malformed input; never throws.
result<manifest_request> decode_manifest_request(std::string_view json);
result<chunks_request> decode_chunks_request(std::string_view json);
result<pack_request> decode_pack_request(std::string_view json);
// The status carried by a reply (the parse failure itself when malformed).
status decode_status(std::string_view json);
result<pack_done> decode_pack_done(std::string_view json);  // the carried error when not ok

}  // namespace loom::cdc
