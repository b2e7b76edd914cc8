// `loom diagnose JOB [--json]`: gathers a job's evidence — the job and its
// events (scheduler), the node roster, each stage's metrics log and config
// when this host can read the job's directory, free space there, the job's
// audit trail — and prints the causes libs/diagnose names, surest first, with
// their repair steps. What it could not read is listed, never guessed.
// `loom diagnose --rules-markdown` prints docs/troubleshooting.md.
#include "client/cli.hpp"
#include "client/job_evidence.hpp"

#include "libs/diagnose/render.hpp"
#include "libs/diagnose/rules.hpp"

#include <cstdio>

namespace loom::cli {

namespace dg = loom::diagnose;

int cmd_diagnose(context& c) {
  if (c.a.flag("rules-markdown")) {
    std::fputs(dg::troubleshooting_markdown().c_str(), stdout);
    return ok_exit;
  }
  if (c.a.positional.size() < 2) return usage(usage_line(*c.a.command));
  auto e = job_evidence(c, c.a.positional[1]);
  if (!e) return fail(c, e.err());
  const auto found = dg::diagnose(*e);
  if (c.json) print_json(dg::render_json(*e, found));
  else std::fputs(indented_lines(dg::render_text(*e, found), "").c_str(), stdout);  // every line escaped
  return ok_exit;
}

}  // namespace loom::cli
