// trainer_poll: what a trainer and the job manager say to each other in a
// PollWork — the trainer's report (its state, progress, notices, an hpo
// trial's score, a diloco site's line) and the answer (its assignment, stop,
// or why its report of a stage's end was refused). Plain values, no logic;
// wire.cpp maps them to and from scheduler.proto.
#pragma once

#include "services/scheduler/jobs/job_store.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::scheduler {

struct peer_info {
  std::string node, endpoint, public_key;  // a member's collective inbox
};

struct assignment {
  std::string job, stage, config_toml, out_dir, init_from;
  std::uint32_t attempt = 0;
  std::uint32_t rank = 0, world = 1;
  std::uint64_t generation = 0;
  std::vector<peer_info> peers;  // by rank; empty for a group of one
  std::uint64_t stop_at = 0;     // an hpo trial's segment: train to this step, score, end (0: none)
  std::string eval_text;         // its held-out text ("" = the tail of data.text)
  std::string tenant;            // the job's (TrainerStatus shows the job to it and admins only; whose data.dataset the trainer fetches)
  std::string aggregation_grant; // a diloco stage: its grant, serialized (aggregation_grant.hpp)
};

// What a trainer reports in each poll.
struct poll_report {
  std::string node, state;  // idle, running, succeeded, failed, stopped, regroup
  std::string job, stage;
  std::uint32_t attempt = 0;
  std::uint64_t step = 0, total_steps = 0;
  double loss = 0, first_loss = 0, tokens_per_s = 0;
  std::string checkpoint, message;
  std::uint64_t generation = 0;             // the group formation it runs (0: none said)
  std::string peer_endpoint, peer_public_key;  // its collective inbox
  struct notice {
    std::uint64_t seq = 0;
    std::string kind, text;
  };
  std::vector<notice> notices;  // rollbacks, snapshot fallbacks: job events
  double val_loss = 0;          // an hpo trial's validation loss at val_step (0: none)
  std::uint64_t val_step = 0;
  site_line site;               // a diloco stage's site (site.site empty otherwise)
  // The edge site whose key sent the poll ("" for this deployment's own
  // trainers): set by the scheduler from the connection, never by the trainer.
  std::string caller_site;
  std::vector<std::string> contributed, missing;  // a diloco stage's member 0 at its end (aggregator's word)
  std::string precision;  // what its matmuls run in: fp32 or bf16 ("" not yet known)
  // Its machine's pressure (load_shedding.hpp): ok, high or sustained ("" from
  // older trainers: ok), and why with the numbers.
  std::string pressure_level, pressure_why;
};

struct poll_answer {
  std::optional<assignment> work;
  bool stop = false;
  std::uint64_t notices_acked = 0;
  // The report's end of a stage was not applied: the node does not hold
  // that job/stage/attempt. Why, naming them ("" when applied or none).
  std::string refused;
};

}  // namespace loom::scheduler
