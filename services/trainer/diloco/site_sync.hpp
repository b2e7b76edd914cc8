// site_sync: a diloco stage's trainer as one site of a cross-site aggregation
// (issue 15). It wraps libs/diloco/client's site_client with the policy of a
// training loop that never waits for the network: the network is a thread
// of its own (the sync thread, one per stage run), and the training thread
// only hands fragments over and takes new global fragments back.
//
//   start     join the aggregation (blocking: nothing to train before): the
//             model's parameters become the global ones; the sync thread starts
//   after_step(t)   at the step boundary, on the training thread:
//             1. merge every global fragment the sync thread brought back:
//                θ[p] = θ_new + (θ[p] − θ_sent[p])  (keep_progress: the steps
//                trained since the delta left are kept; bitwise θ_new when none)
//             2. fragment p due after step t (fragment_plan::due_after): copy
//                θ[p] (the delta's source, θ_sent) and hand it over. Due
//                while its last delta is still out (this site is a round
//                ahead of the quorum): it waits for that version, up to
//                sync_wait_s, but only while the aggregator answers — a
//                request unanswered for `patience`, or an outage, and it
//                trains on: the delta is deferred (handed once its version
//                is merged), never skipped — every site sends one delta per
//                due point, so the rounds stay aligned and close by quorum.
//             A copy and a lock: the training thread never waits on a socket,
//             retry or backoff; at most on the other sites (a bounded lead).
//   sync thread   per handed fragment: Δ_p = θ_a[p] − θ_sent[p] (site_state),
//             sent with error feedback; polls until the round's version comes
//             (re-sending what a restarted aggregator lost), then hands θ_new[p]
//             back. Unreachable aggregator: backoff, on this thread only.
//   finish    blocks (the end of the stage): a last delta of every fragment
//             not due at the final step, every delta owed and every version to
//             come (up to final_wait_s); the sync thread ends; with take_global,
//             once no version moved for the longest round deadline, the
//             parameters become the aggregator's global θ: the stage's model.
//
// Determinism: the merge points are step boundaries, so for a given order of
// arrivals (which version is merged after which step) the result is fixed.
// Memory: besides site_state's anchor, one model-sized scratch on the sync
// thread and, per fragment out, its θ_sent (model/P).
// Threads: start, after_step, finish and the destructor on the training
// thread; stats() and version() from any thread. Its ZeroMQ context is its own.
#pragma once

#include "libs/codec/codec.hpp"
#include "libs/diloco/client/site_client.hpp"
#include "libs/diloco/progress/site_progress.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"
#include "services/trainer/diloco/transfer_rate.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
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
  // on a box loaded to 4x its cores 1 s, and with four sites sharing two
  // cores with it 2 s, timed out — and a request given up whose message the
  // aggregator still takes later makes the re-send a duplicate. It blocks
  // only the sync thread (the training thread's wait ends after `patience`),
  // so it can be long.
  std::chrono::milliseconds timeout{5000};
  // A site a round ahead of the others waits this long at most, at a due
  // point, for its last delta's version (bounded lead, diloco.sync_wait_s);
  // a version later than this after its delta counts as a late merge.
  double sync_wait_s = 10;
  // That wait ends when a request of the sync thread is unanswered for this
  // long: a loopback or LAN answer takes milliseconds (a state save ~50 ms),
  // so the aggregator is then gone or swamped, and training goes on.
  std::chrono::milliseconds patience{250};
  double join_wait_s = 180;    // start(): trying to join before the stage fails
  double final_wait_s = 300;   // finish(): for the last versions
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string&)> log;
  // The site's link to the aggregator, emulated (LOOM_LINK_SHAPE[_<SITE>]): diloco::client_options::link.
  std::optional<wire::link_config> link;
};

struct site_sync_stats {
  std::uint64_t syncs = 0;          // deltas sent (first sends)
  std::uint64_t deferred = 0;       // due while the fragment's last delta was still out
  std::uint64_t late = 0;           // deltas the aggregator took late (folded into a later round)
  std::uint64_t dropped = 0;        // deltas the aggregator dropped as stale
  std::uint64_t late_merges = 0;    // versions that came more than sync_wait_s after their delta
  std::uint64_t rounds_joined = 0;  // versions merged that held a delta of this site
  std::uint64_t unreachable = 0;    // requests that found no aggregator
  double stall_s = 0;               // training thread inside after_step (copies, merges, the lock, the lead wait)
  double finish_s = 0;              // training thread inside finish (the stage's end)
  double compression_error = 0;     // last delta: ‖Δ − decode(encode(Δ))‖ / ‖Δ‖ of the uplink codec
  std::vector<double> sync_ms;      // delta sent -> its round's version received (sync thread)
  double up_bytes_per_s = 0;        // uplink: EWMA of acknowledged delta payload bytes / send time (transfer_rate)
  diloco::client_stats wire;        // bytes and messages (site_client)
};

class site_sync {
 public:
  // invalid_argument for a missing locate or a bad key.
  static result<std::unique_ptr<site_sync>> make(site_sync_options o);
  ~site_sync();  // ends the sync thread (an open request is cut short)

  // Joins; `params` become the global parameters. unavailable after
  // join_wait_s, or when *stop is set; invalid_argument when the
  // aggregation's model is not this size. Again (a restarted run): joins anew.
  status start(std::span<float> params);
  // After inner step `step` (1-based), which trained on `tokens` tokens.
  // Errors only for what retrying cannot fix (a refused delta other than
  // stale, a corrupt answer), met by the sync thread since the last call; an
  // unreachable aggregator is not an error.
  status after_step(std::uint64_t step, std::span<float> params, std::uint64_t tokens);
  // After the last step. unavailable when the last versions did not come in final_wait_s.
  status finish(std::uint64_t step, std::span<float> params, bool take_global);

  site_sync_stats stats() const;
  // What the site's trainer reports with each poll (`loom job watch`): its
  // sync's figures (the caller adds its step and loss).
  diloco::site_progress progress() const;
  std::uint64_t version(int p) const;  // fragment p's version merged into the parameters
  int fragments() const { return frags_; }
  const std::string& job() const { return o_.job; }
  const std::string& site() const { return o_.site; }

 private:
  using clock = std::chrono::steady_clock;
  using values = std::shared_ptr<const std::vector<float>>;
  // One fragment between the two threads (under mu_). idle -> queued (the
  // training thread hands θ_sent) -> out (the sync thread took it) -> back
  // (θ_new came) -> idle (the training thread merged it).
  struct slot {
    enum class phase { idle, queued, out, back } at = phase::idle;
    values sent;                 // θ_sent[p], from queued until merged
    std::uint64_t tokens = 0;    // trained since the last delta (queued)
    std::vector<float> global;   // back: θ_new[p]
    std::uint64_t version = 0;   // back: its version
    std::uint64_t merged = 0;    // the version in the parameters
  };
  // The sync thread's own view of a fragment it holds.
  struct hold {
    bool held = false, sent = false, dropped = false;
    values source;
    std::uint64_t tokens = 0;
    clock::time_point sent_at{}, next_poll{};
  };

  explicit site_sync(site_sync_options o);
  // Training thread (site_sync.cpp): merge what came back, hand what is owed.
  void exchange(std::span<float> params);
  void merge(int p, std::span<const float> global, const std::vector<float>& sent, std::span<float> params) const;
  bool settled();
  // At a due point whose last delta is out: until it is back, the aggregator
  // looks gone (patience), sync_wait_s passed, an error, or a stop.
  void wait_lead(int p, clock::time_point t0);
  void stop_thread();
  status quiet(std::span<float> params, clock::time_point until);
  result<std::chrono::milliseconds> longest_deadline();
  // Sync thread (site_sync_thread.cpp).
  void loop();
  status work(int p, hold& j);           // one step of fragment p: send it, or poll for its version
  status send(int p, hold& j);
  void returned(int p, hold& j);         // its version came: hand θ_new[p] back
  void measure_codec(int p);            // compression_error of the delta about to go
  // Whether the open round of p already holds this site's delta: one sent
  // before this run (re)joined, which a second send would duplicate.
  result<bool> already_in(int p);
  void unreachable(const error& e);
  void asking(bool on);                 // a request of the sync thread begins / ends
  void answered();                      // the aggregator answered one
  clock::time_point wake_at() const;    // the sync thread's next poll or retry
  bool stopped() const { return o_.stop && o_.stop->load(); }
  void say(const std::string& line) const;

  site_sync_options o_;
  std::unique_ptr<struct site_sync_ctx> ctx_;
  std::unique_ptr<diloco::site_client> client_;  // the sync thread's while it runs
  int frags_ = 0;
  std::vector<float> shadow_;                    // sync thread: θ with fragment p = θ_sent[p] while p is out

  mutable std::mutex mu_;
  std::condition_variable wake_, came_back_;
  std::vector<slot> slots_;
  bool quit_ = false;
  bool reachable_ = true;                        // the last request was answered
  clock::time_point asking_since_{};             // a request in flight since (epoch: none)
  status fatal_ = ok_status();                   // met by the sync thread
  site_sync_stats stats_;
  transfer_rate up_rate_;  // under mu_, fed by the sync thread

  std::vector<std::uint64_t> owed_, tokens_;     // training thread: due points not handed, tokens since
  std::vector<hold> jobs_;                        // sync thread
  std::vector<bool> fresh_;                      // sync thread: no delta of p sent since joining
  clock::time_point retry_at_{};                 // sync thread
  std::chrono::milliseconds backoff_{0};         // sync thread
  std::thread thread_;
};

}  // namespace loom::trainer
