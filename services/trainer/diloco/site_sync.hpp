// site_sync: a diloco stage's trainer as one site of a cross-site aggregation
// (issue 15). It wraps libs/diloco/client's site_client with the policy of a
// training loop that must never wait long for the network:
//
//   start     join the aggregation: the model's parameters become the global ones
//             (a fresh site, a restarted one, a site returning after a cut)
//   after_step(t)   fragment p due after step t (fragment_plan::due_after):
//             the site owes one delta; it sends Δ_p = θ_a[p] − θ[p], then
//             waits up to sync_wait_s for the round's new version and merges
//             it (keep_progress). Not there in time, or the aggregator
//             unreachable: it trains on, looks again after each step (with
//             backoff while unreachable) and merges the version when it comes.
//             Due while the last delta's version has not come: the delta is
//             deferred (sent once it came), never skipped — every site sends
//             one delta per due point, so the rounds stay aligned and close
//             by quorum, also after an outage.
//   finish    a last delta for every fragment not due at the final step, then
//             every delta owed and every version to come (retrying through
//             outages, up to final_wait_s); with take_global, once no version
//             has moved for the longest round deadline (late deltas close
//             rounds after the last quorum), the parameters become the
//             aggregator's global θ (fetched whole): the stage's final model.
//
// Owned by the training thread; not thread-safe. Its ZeroMQ context is its own.
#pragma once

#include "libs/codec/codec.hpp"
#include "libs/diloco/client/site_client.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::trainer {

// Where an aggregation's delta server listens (StartAggregationReply).
struct aggregator_address {
  std::string endpoint, public_key;
};

struct site_sync_options {
  std::string job;             // the aggregation's name
  std::string site;            // this site's name (its key is keys/diloco/<site>.pub, or keys/peers/ for another deployment, at the aggregator)
  wire::curve_keypair keys;    // the site's identity
  codec::codec_id codec = codec::codec_id::int8;  // uplink
  // Starts the aggregation (or finds it: the same spec answers again) and
  // says where its delta server is. Called by start() until it succeeds.
  std::function<result<aggregator_address>()> locate;
  // One request to the delta server. An answer takes a millisecond on
  // loopback, but the server's thread also saves the job's state (O(model),
  // with fsync: 43 MB for the tiny template, ~50 ms) after each outer step;
  // on a box loaded to 4x its cores 1 s timed out, and a busy aggregator
  // must not look unreachable.
  std::chrono::milliseconds timeout{2000};
  double sync_wait_s = 10;     // at a sync, for the round's version (diloco.sync_wait_s)
  double join_wait_s = 180;    // start(): trying to join before the stage fails
  double final_wait_s = 300;   // finish(): for the last versions
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string&)> log;
  // The site's link to the aggregator, emulated (LOOM_LINK_SHAPE[_<SITE>]): diloco::client_options::link.
  std::optional<wire::link_config> link;
};

struct site_sync_stats {
  std::uint64_t syncs = 0;         // deltas sent
  std::uint64_t deferred = 0;      // due while the last delta's version had not come
  std::uint64_t late_merges = 0;   // versions merged after sync_wait_s (overlapped with training)
  std::uint64_t unreachable = 0;   // requests that found no aggregator
  double stall_s = 0;              // time spent waiting on the aggregator in after_step
  std::vector<double> sync_ms;     // delta sent -> its round's version merged, when within the wait
  diloco::client_stats wire;       // bytes and messages (site_client)
};

class site_sync {
 public:
  // invalid_argument for a missing locate or a bad key.
  static result<std::unique_ptr<site_sync>> make(site_sync_options o);
  ~site_sync();

  // Joins; `params` become the global parameters. unavailable after
  // join_wait_s, cancelled-like unavailable when *stop is set;
  // invalid_argument when the aggregation's model is not this size.
  status start(std::span<float> params);
  // After inner step `step` (1-based), which trained on `tokens` tokens.
  // Errors only for what retrying cannot fix (a refused delta other than
  // stale, a corrupt answer); an unreachable aggregator is not an error.
  status after_step(std::uint64_t step, std::span<float> params, std::uint64_t tokens);
  // After the last step. unavailable when the last versions did not come in final_wait_s.
  status finish(std::uint64_t step, std::span<float> params, bool take_global);

  const site_sync_stats& stats();
  std::uint64_t version(int p) const;
  int fragments() const;

 private:
  explicit site_sync(site_sync_options o);
  using clock = std::chrono::steady_clock;
  status send(int p, std::span<float> params);
  // After a step: fragment p's version if it came, its owed delta if it can go.
  status step_fragment(int p, bool due, std::span<float> params);
  // Polls fragment p until its pending delta's version is merged, `until`
  // passes or the aggregator does not answer. true when merged.
  result<bool> wait_merged(int p, std::span<float> params, clock::time_point until);
  // The longest deadline of an open round (RoundStatusQuery).
  result<std::chrono::milliseconds> longest_deadline();
  // Until no version moved for the longest deadline: late deltas folded into
  // a round that closes by deadline move the global after the last quorum.
  status quiet(std::span<float> params, clock::time_point until);
  bool backing_off() const { return clock::now() < retry_at_; }
  void unreachable(const error& e);
  bool stopped() const { return o_.stop && o_.stop->load(); }
  void say(const std::string& line) const;

  site_sync_options o_;
  std::unique_ptr<struct site_sync_ctx> ctx_;
  std::unique_ptr<diloco::site_client> client_;
  std::vector<std::uint64_t> tokens_;     // per fragment, trained since its last delta
  std::vector<std::uint64_t> owed_;       // per fragment, due points not yet sent
  std::vector<clock::time_point> sent_at_;
  clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
  site_sync_stats stats_;
};

}  // namespace loom::trainer
