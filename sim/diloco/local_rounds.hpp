// local_rounds: DiLoCo with M sites in one process, over the real engine
// (gpt2, adamw, train_step) and the shipping DiLoCo code — the aggregator's
// round logic and each site's diloco::site_rounds (cloud.hpp: fragments,
// outer Nesterov step, codecs both ways with error feedback, the server
// applying what it sends) — and, beside it, synchronous data parallelism on
// the same data for comparison. What the aggregator service and the trainers
// do over the wire, without the wire: the loss-parity test and diloco_bench
// use it to measure (loss, bytes), reproducibly.
//
//   sync DP:  every step, one model takes M micro-batches (site s's is
//             micro-batch s): the all-reduced gradient of M data-parallel sites.
//   DiLoCo:   site s takes one micro-batch of its own shard per inner step;
//             after step t the fragment due (fragment_plan::due_after) syncs:
//             each site's Δ = θ_anchor − θ_local is encoded (uplink codec, EF
//             per site) and submitted; the round closes by quorum (every
//             site), or by its deadline when a site is offline; the outer
//             step's U goes down through the downlink's error feedback, and
//             the sites pull it `overlap` inner steps later (an offline site,
//             back, pulls the fragment as a GlobalPull answers).
//             Each delta weighs its tokens, as in the service.
// Equal tokens: both arms see M × batch × seq_len tokens per step.
// Warm start (as DiLoCo, which starts from a pretrained model): run_warm_up
// trains one model by sync DP for W steps; both arms then continue from that
// same checkpoint (parameters, AdamW moments, the lr schedule's step), so
// the warm-up's tokens and bytes are the same for both.
// Single-threaded driver (the engine's kernels use OpenMP inside).
#pragma once

#include "libs/codec/codec.hpp"
#include "libs/diloco/outer_optimizer.hpp"
#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace loom::sim {

struct local_data {
  std::vector<std::vector<std::int32_t>> shards;  // one per site: its own tokens, never another's
  std::vector<std::int32_t> validation;           // held out, shared by both arms' evaluation
};

struct local_config {
  model::gpt2_config model;
  int batch = 8;
  int seq_len = 32;
  int steps = 400;  // inner steps per site = sync DP steps
  float lr = 3e-3f;
  float min_lr_ratio = 0.1f;
  int warmup = 20;
  float grad_clip = 1.0f;
  std::uint64_t seed = 7;

  int sync_every = 50;  // H
  int fragments = 1;    // P (Streaming DiLoCo when > 1)
  int overlap = 0;      // τ: inner steps between sending a fragment and applying its update
  diloco::outer_options outer;
  codec::codec_id uplink = codec::codec_id::fp32;
  codec::codec_id downlink = codec::codec_id::fp32;
  bool error_feedback = true;  // lossy codecs keep what they drop for the next round
  // Whether site s takes part in the sync after inner step t (false: offline;
  // its delta stays home and it applies the update when back). Empty: always.
  std::function<bool(int site, int step)> online;

  int eval_batches = 16;  // validation: this many (batch × seq_len) windows, fixed
  // OpenMP threads of the engine's kernels. 1: a model this small gains
  // nothing from more, and on busy cores spinning threads cost up to 7x.
  int threads = 1;
};

struct local_result {
  float validation_loss = 0;  // of the final (global, for DiLoCo) parameters
  std::vector<float> train_loss;  // per step: mean over sites
  std::uint64_t bytes_up = 0;     // every payload a site sent
  std::uint64_t bytes_down = 0;   // every payload a site received
  int syncs = 0;                  // fragment syncs (outer steps)
  int missed = 0;                 // (site, sync) pairs skipped because the site was offline
  std::uint64_t params = 0;
};

// Where both arms start. Empty params: θ0 = init_random(seed), fresh AdamW,
// step 0 (a cold start).
struct local_checkpoint {
  std::vector<float> params;
  std::vector<float> adam_m, adam_v;  // the warm-up's AdamW moments, each site gets a copy
  int step = 0;                       // schedule steps taken; total = step + cfg.steps
  float validation_loss = 0;          // of params, on the data's validation tokens
  std::uint64_t bytes_per_site = 0;   // the warm-up's ring all-reduce, sent + received
};

// The tokens of `text` as bytes (vocab 256) for `sites` sites, the last
// `validation_fraction` held out. block > 0: blocks of that many bytes dealt
// round-robin (each site sees every part of the text: an IID split); block 0:
// one contiguous piece per site (each its own licences: non-IID).
local_data bytes_as_sites(std::string_view text, int sites, double validation_fraction, std::size_t block = 0);

// invalid_argument for a bad config (sizes, H < P, data too short for a
// window, a checkpoint of another model's size).
result<local_result> run_sync_dp(const local_config& cfg, const local_data& data, const local_checkpoint& from = {});
result<local_result> run_diloco(const local_config& cfg, const local_data& data, const local_checkpoint& from = {});
// `steps` steps of sync DP on `data` (window streams seeded apart from the
// arms', so the arms see fresh windows), under the schedule of a run of
// steps + cfg.steps: the shared start of both arms. invalid_argument as above
// or for steps < 1.
result<local_checkpoint> run_warm_up(const local_config& cfg, const local_data& data, int steps);

// Bytes one site sends and receives per step with fp32 gradients through a
// ring all-reduce of M members (2·(M−1)/M of the buffer each way), for
// `steps` steps: what DiLoCo's traffic is compared with.
std::uint64_t ring_fp32_bytes(std::uint64_t params, int sites, int steps);

}  // namespace loom::sim
