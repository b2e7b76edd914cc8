// sync_server: serves the datasets under one directory (dataset D = <root>/D;
// a locate hook may place a tenant's datasets elsewhere)
// to sync_clients over ZeroMQ. A broker thread owns the ROUTER (a CURVE
// server behind the context's zap_handler); each client gets a session thread
// that answers its requests (manifest, chunk lists) and pushes the chunks it
// asks for as packs through the foundation's bulk transfer (wire::send_file),
// over an inproc PAIR the broker bridges to that client. Protocol: protocol.hpp.
//
//   client msg ──► broker ──(new routing id)──► spawn session ──► session PAIR
//   session PAIR ──► broker ──► [routing id] + frames ──► client
//   session: idle > session_idle, Bye, or server stop ──► thread ends, reaped
//
// Thread-safety: start/stop from one thread; stats() from any.
#pragma once

#include "libs/cdc/fastcdc.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <zmq.hpp>

namespace loom::cdc {

struct sync_server_options {
  std::string root;                       // dataset D is the directory <root>/D (unless `locate` says otherwise)
  std::string bind = "tcp://127.0.0.1:*";
  std::string scratch_dir;                // packs are staged here; "" = a private dir under $TMPDIR
  params chunking;
  // One thread and at most one staged pack (<= 64 MiB) per session.
  std::size_t max_sessions = 16;
  // A session without a message for this long ends: a client that vanished
  // must not hold a thread. Longer than any client pause between requests.
  std::chrono::milliseconds session_idle{60000};
  // Bulk transfer: no ack for this long fails the pack (wire::send_options).
  std::chrono::milliseconds reply_timeout{10000};
  // Bulk chunk size for packs. The receiver makes every bulk chunk durable
  // with three syncs (data, state file, directory); at 4 MiB that is ~1 ms
  // per MiB here instead of ~4 at the wire's 1 MiB default, and a 16 MiB
  // pack is four chunks, all in flight in one window of eight.
  std::uint32_t bulk_chunk_bytes = 4u << 20;
  // Where dataset `dataset` of `tenant` lies: a directory, or the error the
  // client is answered with (not_found, say). Empty = <root>/<dataset> for
  // tenant "" and not_found for any other tenant. Called from session
  // threads: must be thread-safe.
  std::function<result<std::string>(const std::string& tenant, const std::string& dataset)> locate;
  // May `principal` (the ZAP user id, "" in plaintext) read `dataset` of
  // `tenant`? Empty = every admitted client may read every dataset. A refusal
  // is permission_denied naming the principal, the dataset and the tenant,
  // whether or not the dataset exists. Called from session threads: must be
  // thread-safe.
  std::function<bool(const std::string& principal, const std::string& tenant, const std::string& dataset)> authorize;
  // Is `dataset` of `tenant` fit to be served? Asked (after authorize) before
  // each manifest is built; its error is the client's answer, so a dataset
  // with a missing shard is refused naming it instead of being served short.
  // Empty = always. Called from session threads: must be thread-safe.
  std::function<status(const std::string& tenant, const std::string& dataset)> check;

  // TEST ONLY: after this many bulk chunk sends in all, the server freezes as
  // if killed (no more replies) until destroyed. 0 = never.
  std::uint64_t test_stop_after_bulk_chunks = 0;
  // TEST ONLY: passed to wire::send_options::corrupt_chunk (the wire flips a byte).
  std::function<bool(std::uint32_t index, std::uint32_t attempt)> test_corrupt_bulk_chunk;
  // TEST ONLY: the first this-many packs carry one chunk with a flipped byte
  // (consistent bulk hashes: only the chunk's own SHA-256 can catch it).
  std::uint32_t test_corrupt_packs = 0;
};

struct sync_server_stats {
  std::uint64_t sessions = 0;          // started
  std::uint64_t manifests = 0;         // ManifestRequests answered
  std::uint64_t packs = 0;             // packs fully delivered
  std::uint64_t pack_bytes = 0;        // bytes of those packs
  std::uint64_t bulk_chunks_sent = 0;  // bulk chunk sends, re-sends included
  std::uint64_t bulk_chunks_resent = 0;
  std::uint64_t bulk_bytes_sent = 0;
  std::uint64_t errors = 0;            // requests answered with an error
};

class sync_server {
 public:
  // Binds and starts serving. invalid_argument for a missing root or bad
  // options; unavailable when the endpoint cannot be bound. REQUIRES: a
  // wire::zap_handler for `ctx` with domain `zap_domain` (CURVE form).
  static result<std::unique_ptr<sync_server>> start(zmq::context_t& ctx, const wire::curve_keypair& key,
                                                    std::string zap_domain, sync_server_options options);
  // Plaintext: benchmarks and tests of the protocol only (wire::bench_plaintext_t).
  static result<std::unique_ptr<sync_server>> start(zmq::context_t& ctx, wire::bench_plaintext_t,
                                                    sync_server_options options);

  ~sync_server();  // stops sessions (in-flight packs fail at once) and joins
  sync_server(const sync_server&) = delete;
  sync_server& operator=(const sync_server&) = delete;

  const std::string& endpoint() const;  // with the real port
  sync_server_stats stats() const;

  struct impl;

 private:
  explicit sync_server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace loom::cdc
