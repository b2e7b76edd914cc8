// One client's session on the serving side (internal to libs/cdc): answers
// ManifestRequest / ChunksRequest / PackRequest on a PAIR socket that the
// sync_server broker bridges to the client; a pack is staged in the scratch
// dir, sealed under a key only this server process holds (piece_codecs.hpp),
// and pushed with wire::send_file over the same socket. Runs on its own
// thread; everything in server_shared is safe to share between sessions.
#pragma once

#include "libs/cdc/piece_codecs.hpp"
#include "libs/cdc/served_dataset.hpp"
#include "libs/cdc/sync_server.hpp"

#include <atomic>
#include <cstdint>
#include <string>
#include <zmq.hpp>

namespace loom::cdc {

struct server_counters {
  std::atomic<std::uint64_t> sessions{0}, manifests{0}, packs{0}, pack_bytes{0}, bulk_chunks_sent{0},
      bulk_chunks_resent{0}, bulk_bytes_sent{0}, errors{0};
};

// What all sessions of one server share.
struct server_shared {
  server_shared(const sync_server_options& o, std::string scratch_dir)
      : opt(o), cache(o.chunking), scratch(std::move(scratch_dir)), scratch_key("loom.cdc.pack-scratch"),
        bulk_budget(o.test_stop_after_bulk_chunks), corrupt_packs_left(o.test_corrupt_packs) {}

  const sync_server_options& opt;
  dataset_cache cache;
  const std::string scratch;
  const ephemeral_pieces scratch_key;  // seals every staged pack
  server_counters counters;
  std::atomic<bool> frozen{false};                 // TEST ONLY: the server plays dead
  std::atomic<std::uint64_t> bulk_budget;          // TEST ONLY: bulk chunk sends left
  std::atomic<std::uint32_t> corrupt_packs_left;   // TEST ONLY
};

// Serves one client until it says Bye, stays idle for opt.session_idle, the
// server freezes, or the socket's context shuts down. `tag` names the
// session's scratch files. Never throws.
void run_session(server_shared& shared, zmq::socket_t& socket, const std::string& principal, const std::string& tag);

}  // namespace loom::cdc
