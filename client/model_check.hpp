// What `loom model check` and `loom model export` share (model_check.cpp):
// a version's checks run here against its checkpoint in the data dir, their
// printing, and the audit record the scheduler keeps of an export or of an
// overridden check. Main thread only.
#pragma once

#include "client/cli.hpp"
#include "services/trainer/check/model_check.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace loom::cli {

struct checked {
  std::string version, model, checkpoint;
  modelcheck::check_report report;
};

// GetModel for `version` and each ancestor (their data sources make the
// lineage), then every check with the command line's --held-out, --max-loss
// and --override-compliance/--reason. Errors: the registry's (not_found for
// an unknown version), invalid_argument for a bad option.
result<checked> check_version(context& c, const std::string& version);
nlohmann::json checks_json(const modelcheck::check_report& rep);
void print_checks(const checked& ck);
// Whether the compliance check was overridden (the record then needs admin).
bool overridden(const modelcheck::check_report& rep);
// RecordModelExportRequest to the scheduler (audited there): action check |
// export, outcome passed | failed | exported | refused.
status record(context& c, const checked& ck, const std::string& action, const std::string& outcome,
              const std::string& format, const std::string& type, const std::string& out, const std::string& sha256,
              std::uint64_t bytes);

int cmd_model_check(context& c);   // `loom model check VERSION`
int cmd_model_export(context& c);  // `loom model export VERSION` (model_export.cpp)

}  // namespace loom::cli
