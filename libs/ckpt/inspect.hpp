// inspect: what the cloud learns of one published snapshot directory
// (<root>/step-N) before it trusts it as a stage's result or a model version —
// the signature and every file's SHA-256 (verify_snapshot), the parameters'
// and the manifest's hashes, and the held-out figures an alignment stage
// writes beside its snapshots. The scheduler inspects a checkpoint on its own
// disk; on a cloud split over hosts the aggregator inspects it on its disk for
// the scheduler (InspectCheckpointRequest), with the same code and the same
// (shared) checkpoint key. Stateless functions; thread-safe; they read files
// (a d12 snapshot: about a second).
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace loom::ckpt {

struct snapshot_facts {
  std::uint64_t step = 0;
  std::string manifest_sha256;  // of MANIFEST.json's bytes
  std::string params_sha256;    // model.safetensors, as the verified manifest lists it
  // The stage's held-out evaluation, from the eval.json an alignment stage
  // writes beside its snapshots (<stage>/eval.json for <stage>/checkpoints/
  // step-N): "eval_before_K" and "eval_after_K" for each figure K; empty when
  // there is none (not signed: figures to show, never to trust).
  std::map<std::string, double> eval;
};

// The figures of <dir>/../../eval.json as snapshot_facts::eval names them;
// empty when the file is missing, larger than 64 KiB or not such JSON.
std::map<std::string, double> stage_eval_beside(const std::string& dir);

// Verifies snapshot directory `dir` (its name must be step-N) under `key`
// (the raw checkpoint key) and returns its facts. Errors, each naming `dir`:
// invalid_argument when its name is not step-N; not_found when it is not
// there; corruption naming every problem verification found, or when the
// manifest lists no model.safetensors.
result<snapshot_facts> inspect_snapshot(const std::string& dir, std::string_view key);

// The cheap judgement of a stage's result: only `dir`'s MANIFEST.json — its
// HMAC under `key`, format and the step its name says (verify_manifest: no
// file hashed). invalid_argument when the name is not step-N; corruption
// naming the problem (a missing directory included).
status check_manifest(const std::string& dir, std::string_view key);

}  // namespace loom::ckpt
