// Requests and replies as plain structs, and their codec to loom.v1.Envelope
// bytes. Callers never see protobuf types here (see envelope_pb.hpp for the
// typed helpers). Value types and stateless functions: thread-safe.
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace loom::wire {

// A request: `body` is a serialized message whose full name is `type`.
struct request {
  std::string request_id;      // unique per logical request; retries reuse it
  std::string type;            // e.g. "loom.v1.PingRequest"
  std::string body;            // serialized message bytes
  std::string token;           // bearer token (libs/auth)
  std::uint64_t sent_unix_ns = 0;
  std::uint32_t attempt = 1;   // 1 for the first send, +1 per retry
};

// A reply: echoes request_id and carries exactly one status.
struct reply {
  std::string request_id;
  std::string type;            // of `body`; empty for error replies
  std::string body;
  errc code = errc::ok;
  std::string message;         // for a human: what was wrong and where
  std::map<std::string, std::string> details;

  bool ok() const { return code == errc::ok; }
};

// Longest request_id / type accepted by the decoders: ids are 32 hex chars
// and type names are short; longer ones are garbage or an attack.
constexpr std::size_t max_request_id_bytes = 128;
constexpr std::size_t max_type_bytes = 256;

std::string encode(const request& req);
std::string encode(const reply& rep);

// Decodes and validates a request. invalid_argument naming what is wrong:
// empty frame, not a loom.v1.Envelope, missing/oversized request_id or type,
// body over max_body_bytes, a status on a request. When `request_id_seen` is
// given it receives the envelope's request_id whenever the bytes parsed as an
// Envelope (even if validation then failed), so an error reply can be matched.
result<request> decode_request(const void* data, std::size_t n, std::string* request_id_seen = nullptr);

// Decodes and validates a reply (request_id and type may be empty on error
// replies; a missing status is invalid_argument). An unknown status code from
// a newer peer becomes errc::internal with details["code"] = the number.
result<reply> decode_reply(const void* data, std::size_t n);

reply error_reply(std::string request_id, errc code, std::string message);

// 16 random bytes (OS CSPRNG) as 32 lower-case hex characters.
std::string new_request_id();

}  // namespace loom::wire
