// delta_streams: the delta socket's streamed payloads (issue 26 item 5). A
// delta's payload may come as DeltaChunks followed by its DeltaHeader with
// the last piece, and a pull may ask for a payload in slices (GlobalPull
// offset/max_bytes), so no frame need hold a whole fragment: the 1 GiB frame
// cap no longer bounds the model, and a cut link resumes a transfer where it
// stopped instead of sending the fragment again.
//
// Everything is held per sending CURVE key (the connection's ZAP principal):
// one site can neither add to nor read another's transfer. An upload is held
// per (key, job, fragment): a new delta's first piece replaces the one before;
// an upload idle for `idle` is dropped (expire). With a spool directory an
// upload's pieces go to a file of their own there, not to memory, so what the
// uploads hold in memory does not grow with the sites sending at once: one
// payload, while complete() hands it to the engine. Without one (tests) they
// are held in memory. Spooled pieces are sealed (issue 32 item 3) under a key
// that lives only in this object (atrest::ephemeral_key): the spool dies with
// the process anyway, and what a dead process left there cannot be read. One kept pull payload per key (shared with the
// engine's, for updates and θ_p of the same version).
// Owned by the delta server's thread; not thread-safe.
#pragma once

#include "libs/atrest/ephemeral.hpp"
#include "libs/status/status.hpp"
#include "services/aggregator/aggregation.hpp"
#include "loom/v1/aggregator.pb.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace loom::aggregator {

class delta_streams {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  // `spool`: the directory for uploads' pieces ("" keeps them in memory).
  // What a previous process left there is removed: uploads do not outlive it.
  explicit delta_streams(std::string spool = "", std::chrono::seconds idle = std::chrono::seconds(600));
  ~delta_streams();
  delta_streams(const delta_streams&) = delete;
  delta_streams& operator=(const delta_streams&) = delete;

  // One upload piece from `key`. `limit`: the most bytes this fragment's
  // payload may have (its values in fp32, the largest codec). The payload's
  // bytes held so far; invalid_argument for a piece that cannot belong to a
  // payload of that size, conflict for one out of order (naming the offset
  // expected) or for a later piece of an upload not held (start again at 0),
  // unavailable when the spool cannot take it (naming the file).
  result<std::uint64_t> chunk(const std::string& key, const loom::v1::DeltaChunk& c, std::string_view bytes,
                              std::uint64_t limit, time_point now);

  // The whole payload of a DeltaHeader whose pieces came before it
  // (h.payload_offset() > 0), `last` being its frame; the upload is then
  // forgotten. conflict naming what does not match (no upload held, another
  // round or payload, bytes missing or too many).
  result<std::string> complete(const std::string& key, const loom::v1::DeltaHeader& h, std::string_view last);

  // Keeps a pull's payload for `key`, so that its later slices come from the
  // same bytes even if the fragment moves on meanwhile.
  void keep_pull(const std::string& key, const std::string& job, std::uint32_t fragment, const global_update_header& h,
                 std::shared_ptr<const std::string> payload);
  struct kept {
    global_update_header header;
    std::shared_ptr<const std::string> payload;
  };
  // The payload kept for `key`'s pull of (job, fragment); conflict when there
  // is none (start again from offset 0).
  result<kept> kept_pull(const std::string& key, const std::string& job, std::uint32_t fragment) const;

  // Drops uploads idle since before now - idle.
  void expire(time_point now);
  std::uint64_t staged_bytes() const;  // upload bytes held, all keys (spooled or not)
  std::uint64_t staged_in_memory() const;  // of which in memory

 private:
  struct upload {
    std::string job, site, sha256;
    std::uint64_t round = 0, total = 0;
    std::uint32_t fragment = 0;
    std::string bytes;  // without a spool
    std::string file;   // with one: the pieces so far, sealed
    std::uint64_t held = 0;
    std::uint64_t pieces = 0;  // records in the file
    time_point touched{};
  };
  void drop(const upload& u);
  struct pulled {
    std::string job;
    std::uint32_t fragment = 0;
    kept what;
  };
  std::string spool_;
  atrest::ephemeral_key spool_key_{"loom.aggregator.delta-spool"};
  std::string sealing_;  // a piece's record, its capacity reused
  std::uint64_t next_file_ = 0;
  std::chrono::seconds idle_;
  std::map<std::string, upload> uploads_;  // "<key>\n<job>\n<fragment>"
  std::map<std::string, pulled> pulls_;    // by key
};

}  // namespace loom::aggregator
