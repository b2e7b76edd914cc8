// `loom suggest JOB [--json]`: settings the job could run better with, from
// what it measured (libs/diagnose/suggest.hpp), each with the numbers behind
// it, the --set that applies it and the metric it should move. The CPU's bf16
// units are read from this host's /proc/cpuinfo when the stage ran here.
#include "client/cli.hpp"
#include "client/job_evidence.hpp"
#include "client/procs.hpp"

#include "libs/diagnose/suggest.hpp"
#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace loom::cli {
namespace {

// This host's CPU when some stage of the job ran here (its node "name@<this host>").
diagnose::cpu_facts local_cpu(const diagnose::evidence& e) {
  diagnose::cpu_facts f;
  const std::string here = "@" + host_name();
  bool ran_here = false;
  for (const auto& s : e.stages) ran_here = ran_here || s.node.ends_with(here);
  if (!ran_here) return f;
  auto info = files::read_file("/proc/cpuinfo");
  if (!info) return f;
  f.known = true;
  f.bf16 = info->find(" avx512_bf16") != std::string::npos || info->find(" amx_bf16") != std::string::npos;
  return f;
}

}  // namespace

int cmd_suggest(context& c) {
  if (c.a.positional.size() < 2) return usage(usage_line(*c.a.command));
  auto e = job_evidence(c, c.a.positional[1]);
  if (!e) return fail(c, e.err());
  const auto cpu = local_cpu(*e);
  const auto found = diagnose::suggest(*e, cpu);
  if (c.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& s : found)
      all.push_back({{"id", s.id}, {"title", s.title}, {"stage", s.stage}, {"evidence", s.evidence}, {"set", s.sets},
                     {"command", s.command}, {"metric", s.metric}, {"gain", s.gain}});
    print_json({{"job", e->job}, {"suggestions", all}, {"not_seen", e->gaps}});
    return ok_exit;
  }
  std::string out = e->job + " (" + e->template_name + ", " + e->state + "): " +
                    (found.empty() ? "nothing to suggest from what it measured\n"
                                   : std::to_string(found.size()) + " suggestion(s), largest expected gain first\n");
  for (std::size_t i = 0; i < found.size(); ++i) {
    const auto& s = found[i];
    out += "\n" + std::to_string(i + 1) + ". [" + s.id + "] " + s.title + " (stage " + s.stage + "; moves " + s.metric + ")\n";
    for (const auto& ev : s.evidence) out += "   seen: " + ev + "\n";
    std::string sets;
    for (const auto& x : s.sets) sets += " --set " + x;
    if (sets.empty()) out += "   see:  " + s.command + "\n";
    else out += "   apply:" + sets + "\n   e.g.  " + s.command + "\n";
  }
  for (const auto& g : e->gaps) out += "not seen: " + g + "\n";
  std::fputs(indented_lines(out, "").c_str(), stdout);
  return ok_exit;
}

}  // namespace loom::cli
