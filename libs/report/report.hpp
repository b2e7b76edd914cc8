// `loom report`'s page: one self-contained HTML file of a job — inline CSS and
// SVG, no script, nothing fetched — with its diagnosis, stages, loss / LR /
// throughput / grad-norm curves, the stage timeline, sites, config, datasets,
// checkpoints, model versions and audit trail. Rendered from the evidence
// `loom diagnose` reads (libs/diagnose) and the registry's versions. Pure.
#pragma once

#include "libs/diagnose/evidence.hpp"
#include "libs/diagnose/rules.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::report {

// A model version of the job (the registry's ModelVersion, the fields shown).
struct model_row {
  std::string version, stage, kind, params_sha256, parent;
  std::uint64_t step = 0, created_unix_ns = 0;
  bool current = false;
  std::vector<std::string> datasets;
  std::map<std::string, double> metrics;
};

struct input {
  diagnose::evidence e;
  std::vector<diagnose::finding> findings;
  std::vector<model_row> models;
  std::string generated;  // when, in words ("2026-12-06 02:30:00Z")
};

std::string render_html(const input& in);

}  // namespace loom::report
