// engine: every aggregation this aggregator holds, by job name, with the grant
// that made it (libs/diloco/grant: only a stage the scheduler placed has one),
// and what their events leave behind: audit records (starts, resumes, refused
// callers and deltas with their reason, round failures, rounds closed short of
// quorum, retirements) and loom_aggregator_* metrics.
//
//   grant ──start──▶ being made ──(thread)──▶ live ──export / end / expiry──▶ retired
//   (verified:        (StartAggregation          (deltas, pulls      (its state removed,
//    MAC, expiry,      answers `starting`          from the granted   tombstone kept until
//    caller, spec)     until it is live)           sites only)        the grant expires)
//
// Two threads use it: the service actor (start, export, status:
// aggregator_logic) and the delta server's thread (join, submit, pull, tick).
// One mutex guards the jobs; an outer step runs under it (well under 1 ms for
// the tiny model, about a second per fragment of GPT-2 124M). The save after
// it does not: the saver's thread (saver.hpp) writes the fragment's file and
// the manifest, and the fragment's new version is published once written. A
// new job's initial parameters and first save run on a thread of their own,
// outside the mutex.
// Made in start_extra; outlives restarts of the service actor.
#pragma once

#include "libs/diloco/grant/grant.hpp"
#include "services/aggregator/aggregation.hpp"
#include "services/aggregator/limits.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

namespace loom::metrics {
class service_metrics;
}
namespace loom::audit {
struct record;
}
namespace loom::v1 {
class AggregatorStatusReply;
class AggregationGrant;
class AggregationStatus;
class ExportGlobalRequest;
class RoundStatusList;
}  // namespace loom::v1

namespace loom::aggregator {

class saver;

struct engine_options {
  engine_options() = default;
  // The five every caller gives; the rest keep their defaults.
  engine_options(std::string data_dir, std::string node_id, std::string zone,
                 std::function<void(audit::record)> audit, metrics::service_metrics* metrics);
  std::string data_dir;                          // <data>: aggregator/<job>/, keys/checkpoint.key, jobs/
  std::string node_id, zone;                     // who audit records name
  std::function<void(audit::record)> audit;      // may be empty (tests)
  metrics::service_metrics* metrics = nullptr;   // may be null (tests)
  std::string token_key;                         // verifies grants; empty: every grant is refused
  std::function<std::int64_t()> unix_now;        // wall clock in s (grant expiry); empty: the system's
  start_limits limits = default_limits();
  // StartAggregation waits this long for a new job to be made before it
  // answers `starting` (the tiny model: milliseconds; GPT-2 124M's init and
  // first save: seconds). Below the gateway's 10 s deadline, which it must
  // never meet: an answer past it reads "deadline exceeded" though it worked.
  std::chrono::milliseconds start_wait{2000};
  // Fragments of a job kept in memory (θ_p, m_p, e_p, the held update); the
  // others wait in their files (aggregation_spec::resident_fragments). 0:
  // every fragment. 1 holds the least; a close then reads its fragment back.
  int resident_fragments = 1;
};

struct started {
  std::vector<std::uint64_t> versions;
  bool resumed = false;   // the job existed with the same spec
  bool starting = false;  // accepted and being made: versions empty, ask again
};

// Where a delta-socket key comes from (delta_server.cpp), and so whom it may
// speak for: this deployment's own service keys (keys/curve) for no site,
// other deployments' (keys/peers) and this deployment's diloco stage keys
// (keys/diloco) for a site of a stage of this deployment's trainers, an
// enrolled edge site's trainer key (keys/sites) for that edge site.
enum class key_source { own, peer, diloco, enrolled };
struct site_key {
  std::string site;  // the site it speaks for (the key file's stem); own: the service's name
  key_source source = key_source::own;
  std::string id() const;  // "peers/<site>", "diloco/<site>", "sites/<site>", or the service's name
};

// What ExportGlobal did.
struct export_answer {
  std::string snapshot;                       // "" for end_only
  std::vector<std::string> contributed, missing;
};

class engine {
 public:
  explicit engine(engine_options o);
  ~engine();  // waits for the jobs being made
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // Reloads every saved job (<data>/aggregator/*/state.bin and the fragment
  // files it names) whose grant verifies, and every tombstone whose grant has
  // not expired (older ones are removed). A job whose grant expired is
  // retired now; a job whose files do not load, or that has no grant, is
  // reported (and audited) naming the file, its job left out.
  std::vector<std::string> load_saved(nanos now);

  // StartAggregation from `peer` (its CURVE principal): permission_denied for
  // a grant that does not verify or has expired, a caller that is not a
  // granted site's trainer (or this deployment's trainer key for a stage of
  // its own trainers), a spec that is not the granted one, an init_snapshot
  // outside the job's own directory; conflict for a job already retired;
  // resource_exhausted past the limits. The same grant and spec again
  // answers with the job's state (a later expiry renews it); another spec
  // for a held job is already_exists.
  result<started> start(const aggregation_spec& spec, const loom::v1::AggregationGrant& grant,
                        const std::string& peer, nanos now);
  // In-process (tests, benches): a job with these terms, no grant to verify.
  result<started> start(const aggregation_spec& spec, const diloco::grant_terms& terms, nanos now);

  // The delta socket's requests (delta_server.cpp), `from` being the
  // sender's key: permission_denied (audited) unless it is a granted site's
  // of the job and the site the message names.
  result<join_answer> join(const std::string& job, const std::string& site, const site_key& from);
  std::variant<delta_outcome, refusal> submit(const delta_header& h, std::string_view payload, const site_key& from,
                                              nanos now);
  result<pull_answer> pull(const std::string& job, const std::string& site, std::uint32_t p,
                           std::uint64_t have_version, bool want_params, const site_key& from);
  status round_status(const std::string& job, const site_key& from, loom::v1::RoundStatusList* out);
  result<aggregation_spec> spec(const std::string& job);

  // ExportGlobal from `peer`: the grant and caller as for start; conflict,
  // naming them, unless every granted site (or spec.min_sites of them) had a
  // delta accepted. Writes the job's global θ into the granted stage dir
  // (global_export.hpp) unless end_only, then retires the job; a refusal for
  // want of contributions retires it too (its stage fails with it). Asked
  // again once retired so, it answers the same (a retry, a restarted member 0).
  result<export_answer> export_global(const loom::v1::ExportGlobalRequest& req, const std::string& peer);

  // Closes rounds whose deadline passed (or whose quorum came while their
  // fragment's last save was being written), in every job; retires jobs whose
  // grant expired and forgets tombstones whose grant expired.
  void tick(nanos now);
  // Waits until every save of a closed round is written and its version
  // published (tests; the destructor does it too). REQUIRES: not from the
  // engine's own callbacks.
  void flush_saves();
  // Counts and audits a delta whose header did not parse or pass from_wire.
  void refuse_header(const std::string& principal, const error& e);
  // A request on an open connection whose key left the allow-list since its handshake (a revoked site).
  void refuse_unadmitted(const std::string& principal, const std::string& type);
  // Audits a refused CURVE handshake (an unknown key) seen by the ZAP handler.
  void refused_connections(std::uint64_t n);
  // The most payload bytes a delta of `fragment` may stream (its values in
  // fp32, the largest codec, and a codec header), for a key placed on the
  // job as `site`: a streamed delta's pieces are held only for such a key
  // (permission_denied, audited as aggregation.chunk_refused, otherwise).
  result<std::uint64_t> stream_limit(const std::string& job, std::uint32_t fragment, const std::string& site,
                                     const site_key& from);
  // Counts a message the delta socket received, by its type frame
  // (loom_aggregator_frames_received_total{type}; AggregatorStatusReply.frames_received),
  // and its `bytes` from `principal` (loom_aggregator_link_bytes_total, "in";
  // the link is an enrolled site's name, else "local").
  void frame_received(std::string_view type, std::string_view principal = {}, std::size_t bytes = 0);
  // The answer's bytes to `principal` (link_bytes_total, "out").
  void frame_answered(std::string_view type, std::string_view principal, std::size_t bytes);

  // Jobs and tombstones of `tenant` (every tenant's when all_tenants).
  void describe(loom::v1::AggregatorStatusReply* out, const std::string& tenant, bool all_tenants);

 private:
  struct making;  // a job being made (its thread's outcome)
  struct held {
    std::unique_ptr<aggregation> agg;  // null while being made
    aggregation_spec spec;
    diloco::grant_terms terms;
    std::string grant;                 // serialized loom.v1.AggregationGrant ("" in-process)
    std::uint64_t values = 0;
    std::shared_ptr<making> made;
  };
  struct tombstone {
    std::string bytes;  // loom.v1.RetiredAggregation
    std::string tenant, reason;
    std::int64_t expires_unix = 0;
  };

  std::int64_t unix_now() const;
  held* find(const std::string& job);  // REQUIRES: mu_ held; live jobs only
  // permission_denied (audited as `action`) unless `from` may speak for `site` in job `h`.
  status check_site(const held& h, const std::string& job, const std::string& site, const site_key& from,
                    const char* action);
  result<diloco::grant_terms> check_grant(const loom::v1::AggregationGrant& grant, const std::string& peer,
                                          const char* what);
  result<started> begin(const aggregation_spec& spec, const diloco::grant_terms& terms, std::string grant, nanos now);
  void make(aggregation_spec spec, std::string grant, std::shared_ptr<making> m);
  // Retires job `it` (REQUIRES: mu_ held, live): tombstone, state removed,
  // audited. `end`: what its stage's end (the export) answered, kept so that
  // the same ExportGlobal again answers the same.
  void retire(std::map<std::string, held>::iterator it, const std::string& reason,
              const export_answer* end = nullptr);
  void status_of(const std::string& job, const held& h, loom::v1::AggregationStatus* out) const;
  std::vector<std::string> contributed(const held& h) const;
  error ended(const std::string& job) const;  // not_found for a job neither held nor retired, else naming why it ended
  // A round closed: its save handed to the saver, its audit and metrics.
  void closed(const aggregation& a, const close_report& r);
  // The saver's word on a save: the version published, a failure audited.
  void saved(const std::string& job, const save_task& t, const status& st, double seconds);
  // peer: the delta socket's name of the key a refusal answered ("" for the engine's own records).
  void emit(std::string action, std::string job, std::string reason, std::string payload = "", int outcome = 1,
            std::string peer = "");
  void count(std::string_view name, const std::map<std::string, std::string>& labels, double by = 1);
  void live_gauges(const std::string& job, bool live);
  result<std::vector<float>> initial_params(const aggregation_spec& s, std::size_t total);

  engine_options o_;
  std::mutex mu_;
  std::map<std::string, held> jobs_;
  std::map<std::string, tombstone> retired_;
  std::map<std::string, std::uint64_t, std::less<>> frames_;  // by type, since start
  std::list<std::pair<std::thread, std::shared_ptr<making>>> makers_;  // joined when done (start) or at the end
  std::int64_t next_sweep_ = 0;  // unix s: the next look for expired grants
  std::unique_ptr<saver> saver_;  // last: its thread calls back into the above
};

}  // namespace loom::aggregator
