// snapshot_io: a training run's checkpoint (ARCHITECTURE.md §6) written and read
// through libs/ckpt/gpt2_checkpoint, the format's one owner — model.safetensors
// (the 16 parameter tensors, the model shape in its metadata), optimizer.safetensors (AdamW's m and v, flat, and the
// step count), trainer_state.json (step, LR schedule, RNG seed, data cursor,
// config hash, thread count) under an HMAC-signed MANIFEST.json; a stage
// may add files of its own (a reward model's head: extra_file).
// Stateless functions; one writer per snapshot root at a time.
#pragma once

#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/shards/loader.hpp"
#include "libs/status/status.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"

#include <cstdint>
#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::trainer {

struct train_state {
  std::uint64_t step = 0;   // optimiser steps completed
  std::string config_hash;  // run_config::math_hash()
  engine::lr_schedule schedule;
  std::uint64_t seed = 0;   // the run's RNG seed (init and data order derive from it)
  shards::cursor cursor;    // the loader's position after `step` steps
  int threads = 0;          // the thread count the numbers were produced with
  std::uint64_t tokens_seen = 0;
  float last_loss = 0;
  std::string precision = "fp32";  // what the steps so far ran their matmuls in (issue 28)
  // The micro-batch the steps ran in, where load shedding (or running out of
  // memory) lowered it below train.batch — accumulation raised to match; a
  // resumed run goes on in it. 0: train.batch (snapshots before issue 30).
  int micro_batch = 0;
  // Loader positions of batches skipped after an anomaly rollback: a resumed
  // run skips them too.
  std::vector<shards::cursor> skipped;
};

// The signing key under a data directory (<data>/keys/checkpoint.key), made on
// first use (0600) — but only while no snapshot signed with a lost key exists:
// when one does under <data>/jobs/ or `snapshot_root` (the run's out dir), a
// missing key is not_found naming the key, a snapshot and how to restore it,
// never a fresh key that would refuse them all. Returns the raw key bytes.
result<std::string> checkpoint_key(const std::string& data_dir, const std::string& snapshot_root = "");

// The signing key under `data_dir` if it exists; never creates one (readers:
// `loom-trainer sample`). not_found naming the path when there is none.
result<std::string> existing_checkpoint_key(const std::string& data_dir);

// A further safetensors file of a snapshot, signed with the rest (e.g.
// reward_head.safetensors: the head's tensors and its optimiser's moments).
using extra_file = ckpt::extra_file;

// How save_snapshot rides out a passing storage fault: `attempts` tries in
// all, `wait(d)` between them (d: 250 ms, doubling — about 4 s over 5
// tries, then the stage's own restarts take over: a disk that stays full
// fails the stage within a minute); by default a sleep, tests pass their own.
struct snapshot_retry {
  int attempts = 5;
  std::function<void(std::chrono::milliseconds)> wait;
};

// Publishes root/step-N (N = st.step) and keeps the newest `keep` verified
// snapshots. A failed write or fsync (an I/O error, a full disk) is written
// again after a pause, whole (a half-written step is replaced), up to
// retry.attempts in all, each failure logged on stderr: the state is in
// memory, so a passing fault costs a pause, never the stage. Then the error,
// naming the file and the attempts (LATEST untouched).
result<std::string> save_snapshot(const std::string& root, const engine::gpt2& model, const engine::adamw& opt,
                                  const train_state& st, std::string_view key, int keep,
                                  std::span<const extra_file> extras = {}, const snapshot_retry& retry = {});

// A verified snapshot with its model shape and state, ready to load from.
struct opened_snapshot {
  ckpt::loaded_snapshot where;  // dir, step, files, warnings about refused newer snapshots
  model::gpt2_config model;
  train_state state;
  ckpt::safetensors_file params;  // model.safetensors, read and validated once
};

// `path` is a snapshot root (newest verified, falling back past corrupt ones)
// or one step-N directory (that one only). not_found when there is none;
// corruption naming the file and hashes when none verifies.
result<opened_snapshot> open_snapshot(const std::string& path, std::string_view key);

// Copies the snapshot's parameters into `model`; invalid_argument when a tensor's
// shape differs from the model's, corruption when the file is malformed.
status load_params(const opened_snapshot& s, engine::gpt2& model);
// Puts AdamW's moments and step count back.
status load_optimizer(const opened_snapshot& s, engine::adamw& opt);
// An extra_file of the snapshot (verified with it); not_found when it has none of that name.
result<ckpt::safetensors_file> read_extra(const opened_snapshot& s, const std::string& name);
// AdamW's moments and step count as tensors "<prefix>.m", "<prefix>.v" and
// metadata "<prefix>.steps_taken" of an extra_file, and back (views: valid while opt lives).
void add_optimizer(extra_file& f, const engine::adamw& opt, const std::string& prefix);
status load_optimizer(const ckpt::safetensors_file& f, const std::string& file, engine::adamw& opt,
                      const std::string& prefix);

}  // namespace loom::trainer
