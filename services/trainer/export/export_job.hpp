// export_job: one model check or export, as a cloud trainer runs it for a
// caller (the body of export_tasks.hpp; issue 25 item 3):
//   resolve  the version and its lineage from the scheduler, as the caller
//            may see them (another tenant's: not_found)
//   checks   every pre-export check (services/trainer/check) on the cloud's
//            data: the checkpoint under <data>/jobs, a held-out file only
//            under the import roots, the version's own files only under the
//            job read roots
//   write    an export that passed: the Hugging Face directory or the GGUF
//            file under the task's artefact directory, each file hashed
//   record   the outcome (check passed | failed, export exported | refused)
//            with the scheduler, as this trainer, for the caller; an export
//            that is not recorded is deleted and fails
// The scheduler is reached through a registry_port (the real one in
// export_wire.hpp), so this file sees no protobuf and no socket.
// Runs on export_tasks' runner thread.
#pragma once

#include "services/trainer/export/export_tasks.hpp"

#include <functional>
#include <string>
#include <vector>

namespace loom::trainer {

// A version as the scheduler resolved it for the caller, with its lineage.
struct resolved_version {
  std::string version, tenant, model, checkpoint, params_sha256, config_toml, tokenizer;
  std::string parent_checkpoint;     // the parent version's ("" for a fresh init)
  std::vector<std::string> data;     // its own data sources
  std::vector<std::string> lineage;  // its own, then each ancestor's
};

// What the trainer records (loom.v1.RecordModelExportRequest).
struct export_record {
  std::string export_id, version, action, outcome, format, type, out, output_sha256, reason;
  std::uint64_t output_bytes = 0;
  std::vector<export_check> checks;
  bool override_compliance = false;
};

class registry_port {
 public:
  virtual ~registry_port() = default;
  virtual result<resolved_version> resolve(const std::string& version, const export_caller& c) = 0;
  virtual status record(const export_record& r, const export_caller& c) = 0;
};

struct export_job_options {
  std::string data_dir;  // keys/checkpoint.key, datasets/<name>/
  std::string jobs_dir;  // <data>/jobs: where every version's checkpoint lies
  // Read fresh for each export (`loom up --import-root` may change between runs).
  std::function<std::vector<std::string>()> import_roots;   // a held-out file the caller names
  std::function<std::vector<std::string>()> read_roots;     // the version's own files (layout::job_read_roots)
};

// export_tasks' admit: a held-out file outside the import roots is
// permission_denied naming it and the roots, before anything is queued.
status admit_held_out(const export_job_options& o, const export_request& r);

status run_model_export(const export_job_options& o, registry_port& registry, const export_request& r,
                        const export_caller& c, export_context& ctx);

}  // namespace loom::trainer
