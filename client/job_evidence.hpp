// A job's evidence as `loom diagnose`, `loom report` (and later `loom
// suggest`) read it: the job and its events from the scheduler, the node
// roster, each stage's metrics log and config when this host can read the
// job's directory, free space there, and the job's audit trail. What could
// not be read is listed in evidence::gaps. One command's main thread.
#pragma once

#include "client/cli.hpp"
#include "libs/diagnose/evidence.hpp"

#include <string>

namespace loom::cli {

result<diagnose::evidence> job_evidence(context& c, const std::string& id);

}  // namespace loom::cli
