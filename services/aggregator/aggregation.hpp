// aggregation: one DiLoCo job on the cloud side. job_rounds (membership,
// quorum, deadlines, the outer step) plus what the wire needs around it:
//   uplink    a site's payload checked (size, SHA-256, codec) and decoded
//             before job_rounds sees the values; the sender must be the site
//             it claims to be (its CURVE principal);
//   downlink  the outer update U of each closed round, encoded once with the
//             job's codec through diloco::downlink (error feedback per
//             fragment, its residual saved and reloaded with the job) and
//             kept for pulls; θ takes back U − dec(q), so it is what the
//             sites hold, and a site that is further behind pulls θ in fp32;
//   durable   after every outer step the stepped fragment's file and the
//             job's manifest are written (job_store.hpp), so a restarted
//             aggregator loses no closed round and takes a re-sent delta once.
//             The write runs in close() (inline), or, once defer_saves(), is
//             handed to the caller to run off its lock (the engine's saver):
//             the new version is then published only once written;
//   memory    with files, at most spec.resident_fragments fragments keep θ_p,
//             m_p, e_p and the held update in memory (the least recently used
//             one whose file holds its version leaves first; a fragment being
//             saved stays until written); the others are read back from their
//             file for a close or a pull that needs them. The norm bound uses
//             ‖θ_p‖ kept per fragment, so deltas never need θ_p in memory, and
//             a fragment's sum exists only while it has deltas. What a job
//             holds is bounded by its fragments in use, not the model.
// No sockets, no clock but the outer step's stopwatch: the delta server and
// the engine call it. Owned by the engine; not thread-safe (the engine locks).
#pragma once

#include "libs/codec/codec.hpp"
#include "libs/diloco/downlink.hpp"
#include "libs/diloco/fragment_plan.hpp"
#include "libs/model/gpt_config.hpp"
#include "services/aggregator/messages.hpp"
#include "services/aggregator/rounds.hpp"

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loom::aggregator {

struct aggregation_spec {
  std::string job;
  std::uint64_t flat_size = 0;     // > 0: a flat vector; 0: the GPT-2 shape
  model::gpt2_config gpt2{};
  int fragments = 1;
  std::uint64_t sync_every = 1;
  codec::codec_id codec = codec::codec_id::int8;  // the downlink's
  round_options rounds;
  diloco::outer_options outer;
  std::string init_snapshot;       // signed snapshot dir under the data dir, or
  std::uint64_t init_seed = 0;     // N(0, 0.02) from this seed; 0: zeros
  std::uint64_t max_delta_tokens = 0;  // the most tokens one delta may claim (0: no bound)
  std::uint32_t min_sites = 0;     // sites that must contribute before the export; 0: every granted one
  // false: the downlink without error feedback, the codec alone each round —
  // an ablation for the simulators (sim/diloco); not on the wire, never saved.
  bool error_feedback = true;
  // How many fragments' θ_p, m_p and e_p a job with files keeps in memory
  // (0: every one). The others wait in their fragment's file and are read
  // back for the fragment's close or a pull of θ_p. The aggregator's choice
  // (engine_options), not the job's: not on the wire, never saved.
  int resident_fragments = 0;
};

// The spec's fragment plan (flat or GPT-2). invalid_argument naming the field.
result<diloco::fragment_plan> make_plan(const aggregation_spec& s);
// A job name: 1-64 of [A-Za-z0-9._-], not starting with '.'.
bool valid_job_name(std::string_view job);
// Initial parameters from a seed: N(0, 0.02) (mt19937_64), or zeros for seed 0.
std::vector<float> seeded_params(std::size_t n, std::uint64_t seed);

// A fragment's newest outer update as the sites receive it (kept across a
// restart, so a site one version behind gets the same bytes as the others).
struct held_update {
  global_update_header header;
  std::shared_ptr<const std::string> payload;
};

// One fragment's file in a saved job (job_store.hpp): its name in the job's
// directory, the version it holds, the SHA-256 and size of the whole file.
struct fragment_file {
  std::uint32_t fragment = 0;
  std::uint64_t version = 0;
  std::string name;
  std::string sha256;  // 32 raw bytes
  std::uint64_t bytes = 0;
};

// One fragment's tensors as its file holds them: θ_p, m_p (empty when μ = 0)
// and the downlink residual e_p, gathered (the plan's range order).
struct fragment_values {
  std::vector<float> params, momentum, residual;
};

// What the saved files hold; load_state (and the writers) in job_store.hpp.
struct saved_state {
  aggregation_spec spec;
  // Per fragment, or empty: read from each fragment's file when it is needed.
  std::vector<fragment_values> values;
  std::vector<double> theta_norms;  // per fragment ‖θ_p‖ as saved (NaN: the file predates it)
  std::vector<std::uint64_t> versions;
  std::vector<site_view> sites;
  round_stats stats;
  std::uint64_t restarts = 0;
  std::vector<held_update> held;  // at most one per fragment; payload null when values were not read
  std::string grant;              // loom.v1.AggregationGrant, serialized: what created the job
  std::vector<fragment_file> files;  // format 2: the file each fragment was read from; empty: format 1
};

struct save_task;  // job_store.hpp
struct job_files;
struct fragment_source;  // fragment_store.hpp

struct close_report {
  closed_round round;
  double step_seconds = 0;
  status saved = ok_status();  // the save after the step (a failure is a round failure)
  // With defer_saves(): the save, for the caller to run (run_save) off its
  // lock and then report with save_done(); `saved` stays ok.
  std::shared_ptr<save_task> save;
};

struct delta_outcome {
  accepted acc;
  std::optional<close_report> closed;  // this delta closed its round
  std::uint64_t version = 0;           // the fragment's version after it
};

// A refused delta: the reason label (job_rounds' reasons, or the wire's:
// bad_header, forged_site, truncated_frame, bad_payload; or the grant's and
// the bounds': not_granted, too_many_tokens, norm_bound) and the error.
struct refusal {
  std::string reason;
  error err;
};

struct pull_answer {
  bool has_update = false;              // false: nothing newer than have_version
  global_update_header header;
  std::shared_ptr<const std::string> payload;
  std::uint64_t version = 0;            // the fragment's version
  std::int64_t last_round = -1;         // the site's last round the job holds for it
};

struct join_answer {
  std::vector<std::uint64_t> versions;
  std::vector<std::int64_t> last_round;
};

class aggregation {
 public:
  // A new job at `init` (size = the plan's total), saved under `state_file`
  // (its manifest; the fragments' files beside it) with `grant` (a
  // serialized loom.v1.AggregationGrant). An empty state_file keeps the job
  // in memory only (the simulators in sim/).
  static result<std::unique_ptr<aggregation>> create(aggregation_spec spec, std::vector<float> init,
                                                     std::string state_file, nanos now, std::string grant = "");
  // A job reloaded from its saved state (restarts + 1 in a new manifest; a
  // format-1 state is written again as format 2, its state.bin replaced last).
  static result<std::unique_ptr<aggregation>> restore(saved_state st, std::string state_file, nanos now);

  // From now on close() does not write: its report carries the save
  // (close_report::save). Until save_done(p), fragment p's new version is
  // not published (pull, join, the delta's reply: the one before) and p
  // does not close again, so θ_p, m_p and e_p, which the save reads in
  // place, stay as they were at the close.
  void defer_saves() { defer_ = true; }
  // The deferred save of fragment p was run (written or failed: the engine
  // reports a failure as a round failure; the version is published either way).
  // A written fragment may now leave memory (spec.resident_fragments).
  void save_done(std::uint32_t p);
  // Whether `t` is one of this job's saves (not a job of the same name since).
  bool saves_into(const save_task& t) const;
  // Each fragment's published version: the open round, or the one before
  // while that round's save is being written.
  std::vector<std::uint64_t> versions() const;

  // Enrols the site under its key (first time) and makes it active.
  result<join_answer> join(const std::string& site, const std::string& key_id);
  // A delta sent with the key of site `sender`. Accepted: summed in, and
  // the round closed when it may. Refused: the reason and the error. Beyond
  // job_rounds' checks: the sender is the site named, the payload is the
  // header's, tokens ≤ spec.max_delta_tokens, ‖Δ‖ within max_delta_norm.
  std::variant<delta_outcome, refusal> submit(const delta_header& h, std::string_view payload,
                                              const std::string& sender, nanos now);
  // Counts a refusal decided outside (the engine's not_granted) with the wire's.
  refusal refuse(std::string reason, error e);
  // What fragment p has newer than have_version for `site`.
  result<pull_answer> pull(const std::string& site, std::uint32_t p, std::uint64_t have_version, bool want_params);
  // Closes the rounds whose deadline passed (with at least one delta).
  std::vector<close_report> tick(nanos now);

  const aggregation_spec& spec() const { return spec_; }
  const job_rounds& rounds() const { return *rounds_; }
  std::uint64_t bytes_received() const { return bytes_in_; }
  std::uint64_t bytes_sent() const { return bytes_out_; }
  std::uint64_t restarts() const { return restarts_; }
  const std::map<std::string, std::uint64_t>& wire_refusals() const { return wire_refusals_; }
  const std::string& grant() const { return grant_; }
  // Of the deltas within the norm bound (this process): max ‖Δ_p‖/‖θ_p‖, max ‖Δ_p‖/bound.
  double max_norm_ratio() const { return max_norm_ratio_; }
  double max_bound_use() const { return max_bound_use_; }
  void set_grant(std::string g) { grant_ = std::move(g); }

  // Fragments whose θ_p, m_p and e_p are in memory now; how many times a
  // fragment was read back from its file, and dropped from memory, so far.
  int resident_fragments() const { return rounds_->optimizer().loaded_count(); }
  std::uint64_t fragment_loads() const { return loads_; }
  std::uint64_t fragment_unloads() const { return unloads_; }
  // The whole θ in the model's layout (the export, the tombstone's hash): a
  // fragment not in memory is read from its file for it and stays there.
  // corruption naming the file when one cannot be read.
  result<std::vector<float>> full_params();

 private:
  aggregation(aggregation_spec spec, job_rounds rounds, diloco::downlink down, std::string state_file);
  // Every fragment's file, then the manifest (a new job, an upgraded one).
  status save_all();
  // What fragment p's file is written from (views of θ_p, m_p, e_p), and the
  // manifest's job-level part.
  fragment_source source(std::uint32_t p) const;
  saved_state header() const;
  std::uint64_t published(std::uint32_t p) const { return rounds_->open_round(p) - saving_[p]; }
  close_report close(std::uint32_t p, nanos now);
  // too_many_tokens / norm_bound, or nullopt. REQUIRES: values are fragment p's.
  std::optional<refusal> out_of_bounds(const delta_meta& d, std::span<const float> values);
  // Residency. ensure_loaded: fragment p in memory (read from its file, after
  // making room), or the read's error. evictable: p may leave memory now.
  status ensure_loaded(std::uint32_t p);
  bool evictable(std::uint32_t p) const;
  void evict(std::uint32_t p);
  // Drops the least recently used evictable fragments (never `keep`) until
  // fewer than `below` are in memory, or none can go.
  void make_room(int below, std::optional<std::uint32_t> keep = std::nullopt);
  // Fragment p's values in memory from `v` (sizes checked by the optimizer
  // and the downlink), its norm taken and its use recorded.
  status take_values(std::uint32_t p, fragment_values v);
  std::string dir() const;
  // The held update's payload of p (read from its file when not in memory).
  result<std::shared_ptr<const std::string>> held_payload(std::uint32_t p);

  aggregation_spec spec_;
  std::unique_ptr<job_rounds> rounds_;
  std::string state_file_;
  std::shared_ptr<job_files> files_;  // null: in memory only
  bool defer_ = false;
  std::vector<std::uint8_t> saving_;  // per fragment: 1 while its close's deferred save is not done
  diloco::downlink downlink_;                  // the downlink's error feedback
  std::vector<std::optional<held_update>> last_update_;  // per fragment: the newest version's U
  // Per fragment: (site, its last round before) of each delta summed since the
  // fragment's last step, so a save never claims a delta its files lack.
  std::vector<std::vector<std::pair<std::string, std::int64_t>>> unsaved_;
  std::vector<float> decoded_, update_, correction_;  // scratch for one fragment's values
  std::vector<std::byte> encoded_;
  std::uint64_t bytes_in_ = 0, bytes_out_ = 0, restarts_ = 0;
  std::map<std::string, std::uint64_t> wire_refusals_;
  std::string grant_;
  double max_norm_ratio_ = 0, max_bound_use_ = 0;
  std::vector<double> theta_norm_;     // per fragment ‖θ_p‖ (NaN: not known until p is read)
  std::vector<std::uint64_t> used_;    // per fragment: when it was last needed in memory
  std::uint64_t use_clock_ = 0;
  // Per fragment: a held payload that left memory, while a pull still holds it.
  std::vector<std::weak_ptr<const std::string>> held_cache_;
  // Per fragment: θ_p in fp32 as last pulled, shared by the pulls of the same
  // version while one of them holds it (sites joining at once encode it once).
  struct params_payload {
    global_update_header header;
    std::weak_ptr<const std::string> payload;
  };
  std::vector<params_payload> params_cache_;
  std::uint64_t loads_ = 0, unloads_ = 0;
  fragment_values spare_;  // the buffers of the last fragment to leave memory, for the next to come in
};

}  // namespace loom::aggregator
