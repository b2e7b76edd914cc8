// `loom report JOB --out FILE`: one self-contained HTML page of a job (no
// script, nothing fetched: it opens anywhere, mailed or archived) — its
// diagnosis, stages, curves, timeline, sites, config, data, checkpoints,
// model versions, events and audit trail (libs/report). Written owner-only:
// it holds the job's audit trail.
#include "client/cli.hpp"
#include "client/job_evidence.hpp"
#include "client/typed_call.hpp"

#include "libs/files/files.hpp"
#include "libs/report/report.hpp"
#include "loom/v1/models.pb.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

namespace loom::cli {

int cmd_report(context& c) {
  if (c.a.positional.size() < 2) return usage(usage_line(*c.a.command));
  const auto out = c.a.get("out");
  if (!out) return usage(usage_line(*c.a.command));
  auto e = job_evidence(c, c.a.positional[1]);
  if (!e) return fail(c, e.err());
  report::input in;
  in.findings = diagnose::diagnose(*e);
  loom::v1::ListModelsRequest req;
  req.set_model(e->name);
  if (auto rep = typed_call<loom::v1::ListModelsReply>(c, "scheduler", req, 1); rep) {
    for (const auto& v : rep->versions()) {
      if (v.job_id() != e->job) continue;
      report::model_row m{v.version(), v.stage(), v.kind(), v.params_sha256(), v.parent(), v.step(), v.created_unix_ns(),
                          v.current(), {v.datasets().begin(), v.datasets().end()}, {}};
      for (const auto& [k, x] : v.metrics()) m.metrics[k] = x;
      in.models.push_back(std::move(m));
    }
  } else {
    e->gaps.push_back("the model registry: " + rep.err().message);
  }
  in.generated = when(e->now_unix_ns);
  in.e = std::move(*e);
  const std::string html = report::render_html(in);
  if (auto st = files::write_atomic(*out, html, 0600); !st) return fail(c, st.err());
  if (c.json)
    print_json(nlohmann::json{{"job", in.e.job}, {"out", *out}, {"bytes", html.size()}, {"causes", in.findings.size()}});
  else std::printf("wrote %s (%zu bytes): the report of %s\n", printable(*out).c_str(), html.size(), printable(in.e.job).c_str());
  return ok_exit;
}

}  // namespace loom::cli
