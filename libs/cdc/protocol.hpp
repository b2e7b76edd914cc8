// The sync protocol's control messages, as domain structs, and their codec:
// loom.v1.Sync* (proto/loom/v1/sync.proto). The only file that sees the
// protobuf messages; chunk bytes never travel here: they go as packs through
// the foundation's bulk transfer (libs/wire/bulk_transport.hpp, loom.v1.Bulk*).
// Stateless; thread-safe.
//
// Frames on the client's DEALER (the ROUTER's routing id is not shown); the
// type frame is the message's full name:
//   client -> server   [type][request]
//   server -> client   [type][reply]      every reply carries a Status (field 1)
//   SyncManifestRequest {tenant, dataset}        -> SyncManifest  {status, summary: chunking, root, files}
//   SyncChunksRequest   {tenant, dataset, root, paths[]} -> SyncChunks {status, files[]: one chunk list per path}
//   SyncPackRequest     {tenant, dataset, name, chunks[]} -> bulk BulkOffer/BulkChunk requests from the server,
//                                                 answered by the client's bulk_receiver, then
//                                                 SyncPackDone {status, name, bulk stats}
//   SyncBye             {}                       -> (none; the server ends the session)
//   anything the server cannot parse             -> loom.v1.Status (error_reply_type)
// A pack is the requested chunks' bytes concatenated in request order; its
// name is derived from the list, so a re-request after an interruption offers
// the very same object and the bulk transfer resumes it.
#pragma once

#include "libs/cdc/manifest.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/bulk_transport.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::cdc {

// The full names of the loom.v1 messages (protocol.test.cpp checks them
// against the descriptors).
inline constexpr std::string_view manifest_request_type = "loom.v1.SyncManifestRequest";
inline constexpr std::string_view chunks_request_type = "loom.v1.SyncChunksRequest";
inline constexpr std::string_view pack_request_type = "loom.v1.SyncPackRequest";
inline constexpr std::string_view bye_type = "loom.v1.SyncBye";
inline constexpr std::string_view manifest_reply_type = "loom.v1.SyncManifest";
inline constexpr std::string_view chunks_reply_type = "loom.v1.SyncChunks";
inline constexpr std::string_view pack_done_type = "loom.v1.SyncPackDone";
inline constexpr std::string_view error_reply_type = "loom.v1.Status";

// A pack holds at most this many chunks and bytes: the request stays ~150 KB
// and the server's scratch copy of a pack stays bounded per session.
inline constexpr std::size_t max_pack_chunks = 4096;
inline constexpr std::uint64_t max_pack_bytes = 64u << 20;
// Paths per ChunksRequest: bounds the reply (~40 bytes per chunk).
inline constexpr std::size_t max_paths_per_request = 1024;

// Every request names a dataset of a tenant: dataset names are per tenant
// ("" = the server's default namespace). The server decides who may read it.
struct manifest_request {
  std::string dataset;
  std::string tenant{};
};

struct chunks_request {
  std::string dataset;
  crypto::digest root{};  // the dataset root the client saw; conflict if it moved
  std::vector<std::string> paths;
  std::string tenant{};
};

struct pack_request {
  std::string dataset;
  std::string name;  // == pack_name(chunks)
  std::vector<crypto::digest> chunks;
  std::string tenant{};
};

struct pack_done {
  std::string name;
  wire::transfer_stats bulk;  // the server's side of the bulk transfer
};

// invalid_argument unless 1..128 of [A-Za-z0-9._-] not starting with '.'.
status valid_dataset_name(std::string_view name);
// invalid_argument unless "" or 1..128 of [A-Za-z0-9._@:+-] (a token's
// tenant, libs/auth) with no '/' or control byte.
status valid_tenant_name(std::string_view tenant);

// "pack-" + the first 40 hex digits of SHA-256 over the chunk ids in order.
std::string pack_name(const std::vector<crypto::digest>& chunks);

// ---- client side: requests out, replies in ----------------------------------

std::string encode(const manifest_request& m);
std::string encode(const chunks_request& m);
std::string encode(const pack_request& m);
std::string encode_bye();

// Each: the carried error when the reply's status is not ok; invalid_argument
// when the bytes are not the message (or lack a part: no status, no bulk
// stats, not one chunk list per path of `paths` in order); corruption naming
// `origin` when the manifest or a chunk list fails its checks (manifest.hpp).
// decode_manifest: a summary, which must echo the tenant asked for
// (invalid_argument otherwise: a reply of another tenant, or one cut short).
result<manifest> decode_manifest(std::string_view reply, const std::string& origin, const std::string& tenant = "");
result<std::vector<file_entry>> decode_chunks(std::string_view reply, const std::vector<std::string>& paths,
                                              const std::string& origin);
result<pack_done> decode_pack_done(std::string_view reply);
// The status carried by an error_reply_type frame (the parse failure itself
// when malformed). The empty frame is OK's encoding: an error frame saying
// OK is the caller's to refuse.
status decode_status(std::string_view frame);

// ---- server side: requests in, replies out -----------------------------------

// invalid_argument naming the problem for malformed input; never throws.
result<manifest_request> decode_manifest_request(std::string_view body);
result<chunks_request> decode_chunks_request(std::string_view body);
result<pack_request> decode_pack_request(std::string_view body);

// SyncManifest, ok, chunk lists left out; `tenant` echoes the request's.
std::string encode_summary(const manifest& m, const std::string& tenant = "");
std::string encode_chunks(const std::vector<const file_entry*>& files);  // SyncChunks, ok
std::string encode(const status& s, const pack_done& m);                 // SyncPackDone
// A reply of `type` carrying only the error (error_reply_type: a bare Status).
std::string encode_failure(std::string_view type, const error& e);
std::string encode_status(const status& s);  // a bare loom.v1.Status

}  // namespace loom::cdc
