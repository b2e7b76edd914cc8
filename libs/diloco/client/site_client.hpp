// site_client: a site's side of the aggregator's delta socket (issue 15;
// protocol in services/aggregator/README.md). A CURVE DEALER to the delta
// server, presenting the site's key (the cloud holds it as
// keys/peers/<site>.pub: the key is the site's name there). It joins a job,
// sends a fragment's pseudo-gradient encoded with that fragment's error
// feedback, and pulls and applies the fragment's new global version: the
// arithmetic is diloco::site_rounds (the simulators call the same).
//
// Every request is bounded: `timeout` per attempt, `attempts` tries, each on a
// fresh socket (Lazy Pirate), so an answer to an abandoned request is never
// taken for the next one's; after that, unavailable. A sent delta stays
// pending until a newer version of its fragment is applied: when a poll shows
// the aggregator does not hold it (it restarted before saving it), it is sent
// again, byte for byte; a copy it already holds is refused as a duplicate,
// which counts as delivered. So a delta is counted once whatever is lost.
// An aggregator that restarted before it saved this site's join refuses its
// delta as from an unknown (or not joined) site: the client joins again,
// membership only, and sends it once more (found by the chaos harness
// across hosts: such a refusal failed the stage).
//
// With `link` set, every request and answer crosses an emulated link
// (libs/wire shaped_link: requests on its uplink, answers on its downlink,
// time zero = the client's construction): a dropped message is an attempt
// that times out, an outage makes the aggregator unreachable. The link
// outlives reconnects (its outage schedule goes on); what was on the wire is
// forgotten with the socket.
//
// Owned by one thread (a trainer's sync loop); not thread-safe. The ZeroMQ
// context is the caller's and must outlive the client.
#pragma once

#include "libs/codec/error_feedback.hpp"
#include "libs/diloco/site_rounds.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/link_shaper.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq
namespace loom::v1 {
class GlobalPull;
}
namespace loom::wire {
class shaped_link;
}

namespace loom::diloco {

struct client_options {
  std::string endpoint;       // the delta server's tcp:// endpoint (StartAggregationReply)
  std::string server_public;  // its CURVE public key (Z85)
  wire::curve_keypair keys;   // this site's identity
  std::string job, site;
  codec::codec_id codec = codec::codec_id::int8;  // the uplink's
  // Per attempt: a loopback round trip is well under a millisecond and an
  // outer step of a fragment tens of ms; 2 s means the aggregator is gone.
  std::chrono::milliseconds timeout{2000};
  int attempts = 3;
  site_options merge;
  // Shapes both directions (LOOM_LINK_SHAPE, libs/wire/README.md); nullopt or
  // a perfect link: the real socket only. An attempt's timeout is counted
  // after the request has crossed the uplink and extended while an answer is
  // still crossing the downlink, so bandwidth alone never times one out.
  std::optional<wire::link_config> link;
  // No frame carries more payload than this (issue 26: streamed deltas and
  // pulls): a larger delta goes as DeltaChunks before its header, a larger
  // update or parameter pull comes in slices. A cut link resumes from what
  // the aggregator holds. 0: whole payloads in one frame (capped at 1 GiB).
  std::uint64_t chunk_bytes = std::uint64_t{64} << 20;
};

struct client_stats {
  std::uint64_t deltas_sent = 0;       // first sends
  std::uint64_t resent = 0;            // pending deltas sent again
  std::uint64_t duplicates = 0;        // re-sends the aggregator already held
  std::uint64_t payload_bytes_sent = 0;      // delta payloads, first sends only
  std::uint64_t payload_bytes_received = 0;  // update and parameter payloads
  std::uint64_t updates_applied = 0;   // OUTER_UPDATE
  std::uint64_t params_applied = 0;    // GLOBAL_PARAMS (join, catch-up)
  std::uint64_t chunks_sent = 0;       // DeltaChunks acknowledged (streamed deltas)
  std::uint64_t chunks_received = 0;   // pull slices past the first (streamed pulls)
  std::uint64_t rejoins = 0;           // joins again after an aggregator forgot this site (a restart)
};

struct delta_ack {
  std::uint64_t round = 0;    // the round it counts in
  std::uint64_t version = 0;  // the fragment's version after it
  bool late = false;
  bool closed = false;        // it closed the round
  bool duplicate = false;     // the aggregator already held it
};

class site_client {
 public:
  // invalid_argument for bad keys, an empty job/site or endpoint. Does not connect yet.
  static result<std::unique_ptr<site_client>> make(zmq::context_t& ctx, client_options o);
  ~site_client();

  // Joins the job and pulls every fragment's global parameters: `local`
  // becomes them (resized to the plan's total). A returning site starts over
  // from the current global parameters.
  status join(std::vector<float>& local);
  // Δ_p = anchor[p] − local[p], encoded with fragment p's error feedback,
  // sent for round version(p). deadline_exceeded when the aggregator dropped
  // it as stale (poll then catches up); unavailable when it did not answer
  // (the delta stays pending and a poll sends it again).
  result<delta_ack> send_delta(int p, std::span<const float> local, std::uint64_t tokens);
  // One pull of fragment p: true when a newer version was applied to local.
  result<bool> poll(int p, std::span<float> local);

  const site_state& state() const { return rounds_->state(); }
  const fragment_plan& plan() const { return rounds_->plan(); }
  const client_stats& stats() const { return stats_; }
  bool pending(int p) const { return pending_[p].has_value(); }
  // The emulated link (null without one): what it dropped, held, forgot.
  const wire::shaped_link* link() const { return link_.get(); }

  // One raw request ([type][frames...]) and its answer's frames (tests of bad input).
  result<std::vector<std::string>> request(const std::vector<std::string>& frames);

 private:
  struct sent {
    std::uint64_t round = 0;
    std::string header, payload;  // frames as sent
  };
  site_client(zmq::context_t& ctx, client_options o);
  // Sends `s`; a refusal for not being a member (unknown_site, not_joined:
  // the aggregator restarted before saving this site's join) joins again
  // (rejoin) and sends once more, unless `rejoined` says it just did.
  result<delta_ack> deliver(int p, const sent& s, bool rejoined = false);
  status rejoin();  // DeltaJoin alone: membership, this site's state untouched
  result<fragment_plan> enrol();  // the DeltaJoin exchange both make: the job's plan
  // A delta's payload but its last piece, as DeltaChunks; the last piece's offset.
  result<std::uint64_t> send_pieces(const sent& s);
  // A GlobalPull answered whole: its slices put together (frames as an unsliced answer's).
  result<std::vector<std::string>> pull_whole(loom::v1::GlobalPull pull);
  // One attempt on sock_: the answer, or nullopt (timed out, dropped, refused by the socket).
  std::optional<std::vector<std::string>> exchange(const std::vector<std::string>& frames);
  status apply(const std::vector<std::string>& reply, int p, std::span<float> local);

  zmq::context_t& ctx_;
  client_options o_;
  std::unique_ptr<zmq::socket_t> sock_;
  std::unique_ptr<wire::shaped_link> link_;
  std::optional<site_rounds> rounds_;            // the site's arithmetic
  std::vector<std::optional<sent>> pending_;     // per fragment
  std::vector<float> values_;                    // scratch
  client_stats stats_;
};

}  // namespace loom::diloco
