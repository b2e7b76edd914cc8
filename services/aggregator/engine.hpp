// engine: every aggregation this aggregator runs, by job name, and what
// their events leave behind: audit records (starts, resumes, rejected deltas
// with their reason, round failures and rounds closed short of quorum) and
// loom_aggregator_* metrics (round, quorum size, outer step seconds, deltas
// accepted/late/dropped/rejected, bytes received/sent).
//
// Two threads use it: the service actor (start, status: aggregator_logic) and
// the delta server's thread (join, submit, pull, tick). One mutex guards the
// jobs; an outer step runs under it (well under 1 ms for the tiny model, tens
// of ms per fragment of GPT-2 124M). Made in start_extra; outlives restarts of
// the service actor.
#pragma once

#include "services/aggregator/aggregation.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <variant>

namespace loom::metrics {
class service_metrics;
}
namespace loom::audit {
struct record;
}
namespace loom::v1 {
class AggregatorStatusReply;
class RoundStatusList;
}  // namespace loom::v1

namespace loom::aggregator {

struct engine_options {
  std::string data_dir;                          // <data>: aggregator/<job>/, keys/checkpoint.key
  std::string node_id, zone;                     // who audit records name
  std::function<void(audit::record)> audit;      // may be empty (tests)
  metrics::service_metrics* metrics = nullptr;   // may be null (tests)
};

struct started {
  std::vector<std::uint64_t> versions;
  bool resumed = false;  // the job existed with the same spec
};

class engine {
 public:
  explicit engine(engine_options o);

  // Reloads every saved job (<data>/aggregator/*/state.bin). A file that does
  // not load is reported (and audited), its job left out; the rest run.
  std::vector<std::string> load_saved(nanos now);

  // Starts a job at its initial parameters (init_snapshot: a signed snapshot
  // under the data dir, verified with <data>/keys/checkpoint.key; else the
  // seed). The same spec again answers with its state; another spec for a
  // running job is already_exists.
  result<started> start(const aggregation_spec& spec, nanos now);

  // The delta socket's requests (delta_server.cpp), `principal` being the
  // sender's CURVE principal.
  result<join_answer> join(const std::string& job, const std::string& site, const std::string& principal);
  std::variant<delta_outcome, refusal> submit(const delta_header& h, std::string_view payload,
                                              const std::string& principal, nanos now);
  result<pull_answer> pull(const std::string& job, const std::string& site, std::uint32_t p,
                           std::uint64_t have_version, bool want_params);
  result<aggregation_spec> spec(const std::string& job);
  // The job's global θ as the cloud's checkpoint snapshot (global_export.hpp).
  result<std::string> export_global(const std::string& job, const std::string& stage_dir, std::uint64_t step,
                                    const std::string& trainer_state);
  status round_status(const std::string& job, loom::v1::RoundStatusList* out);
  // Closes rounds whose deadline passed, in every job.
  void tick(nanos now);
  // Counts and audits a delta whose header did not parse or pass from_wire.
  void refuse_header(const std::string& principal, const error& e);
  // Audits a refused CURVE handshake (an unknown key) seen by the ZAP handler.
  void refused_connections(std::uint64_t n);
  // Counts a message the delta socket received, by its type frame
  // (loom_aggregator_frames_received_total{type}; AggregatorStatusReply.frames_received).
  void frame_received(std::string_view type);

  void describe(loom::v1::AggregatorStatusReply* out);

 private:
  aggregation* find(const std::string& job);  // REQUIRES: mu_ held
  void closed(const aggregation& a, const close_report& r);
  void emit(std::string action, std::string job, std::string reason, std::string payload = "", int outcome = 1);
  void count(std::string_view name, const std::map<std::string, std::string>& labels, double by = 1);
  result<std::vector<float>> initial_params(const aggregation_spec& s, std::size_t total);

  engine_options o_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<aggregation>> jobs_;
  std::map<std::string, std::uint64_t, std::less<>> frames_;  // by type, since start
};

}  // namespace loom::aggregator
