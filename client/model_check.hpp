// What `loom model check` and `loom model export` share (model_check.cpp):
// neither reads the data dir. Both ask the cloud's trainer to run the
// version's pre-export checks on the cloud's data (StartModelExport), follow
// it until it ends (GetModelExport) and print its checks; an export's
// artefact then comes back in hashed chunks (FetchModelExport, model_export.cpp).
// The trainer records every outcome with the scheduler (the audit log); the
// client only reports it. So a client on another host, with nothing but its
// keys, the services' public keys and endpoints and a token, checks and
// exports. Main thread only.
#pragma once

#include "client/cli.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace loom::cli {

// A check or export as the trainer ended it (loom.v1.ModelExportInfo).
struct trainer_export {
  struct check {
    std::string name, status, detail;
    double seconds = 0;
  };
  struct file {
    std::string name;
    std::uint64_t bytes = 0;
    std::string sha256;
  };
  std::string id, state, version, model, checkpoint, trainer, output_sha256;
  std::vector<check> checks;
  std::vector<file> files;
  bool passed = false, recorded = false;
  std::uint64_t output_bytes = 0;
  double check_seconds = 0, export_seconds = 0;
};

// Starts `action` (check | export) of `version` on the trainer with the
// command line's --held-out, --max-loss and --override-compliance/--reason,
// and waits until it has ended. The trainer's error when it failed (not_found
// for a version the caller's tenant has not, permission_denied for a held-out
// file outside its import roots or an override by a non-admin, ...).
result<trainer_export> run_on_trainer(context& c, const std::string& action, const std::string& version,
                                      const std::string& format, const std::string& type, const std::string& out);
// Tells the trainer the artefact is fetched (or abandoned): it deletes its copy.
void end_on_trainer(context& c, const std::string& id);
nlohmann::json checks_json(const trainer_export& e);
void print_checks(const trainer_export& e);

int cmd_model_check(context& c);   // `loom model check VERSION`
int cmd_model_export(context& c);  // `loom model export VERSION` (model_export.cpp)

}  // namespace loom::cli
