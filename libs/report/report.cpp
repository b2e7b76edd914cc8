#include "libs/report/report.hpp"

#include "libs/report/svg.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace loom::report {
namespace {

std::string when(std::uint64_t ns) {
  if (ns == 0) return "-";
  const std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%SZ", &tm);
  return b;
}

std::string fixed(double v, const char* f = "%.4f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string cell(const std::string& s) { return "<td>" + escape(s) + "</td>"; }

std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                  const std::string& cls = "") {
  std::string t = "<table" + (cls.empty() ? std::string() : " class=\"" + cls + "\"") + "><tr>";
  for (const auto& h : head) t += "<th>" + escape(h) + "</th>";
  t += "</tr>";
  for (const auto& r : rows) {
    t += "<tr>";
    for (const auto& c : r) t += cell(c);
    t += "</tr>";
  }
  return t + "</table>";
}

const char* style = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1000px;color:#1d2330;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d8dde6;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}.meta{color:#5a6477}table{border-collapse:collapse;margin:6px 0;font-size:13px}
th,td{border:1px solid #d8dde6;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f2f4f8}
pre{background:#f6f8fa;border:1px solid #d8dde6;padding:8px;overflow:auto;font-size:12px}
figure{display:inline-block;margin:6px 12px 6px 0}figcaption{font-size:12px;color:#5a6477}
svg text{font-size:11px;fill:#5a6477}.plot{fill:#fbfcfe;stroke:#d8dde6}.line{fill:none;stroke:#2f6fdb;stroke-width:1.5}
.dot{fill:#2f6fdb}.bar{fill:#8fb3ef}.bar.failed{fill:#e58b8b}.bar.running{fill:#f2c46d}.bar.cancelled{fill:#b9bfca}
.tick{stroke:#1d2330;stroke-width:1.5}.cause{border-left:4px solid #e58b8b;padding:4px 10px;margin:8px 0;background:#fff7f7}
.ok{border-left:4px solid #7cc48b;padding:4px 10px;background:#f5fbf6}.gap{color:#8a5a00}
)";

std::vector<point> series(const std::vector<diagnose::step_point>& steps, double diagnose::step_point::*field) {
  std::vector<point> out;
  out.reserve(steps.size());
  for (const auto& p : steps) out.push_back({p.step, p.*field});
  return thin(out);
}

}  // namespace

std::string render_html(const input& in) {
  const auto& e = in.e;
  std::string h = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                  escape("EdgeLoom report: " + e.job) + "</title><style>" + style + "</style></head><body>";
  h += "<h1>" + escape(e.job + " — " + e.name) + "</h1><p class=\"meta\">" +
       escape("template " + e.template_name + " · " + e.state + " · tenant " + e.tenant + " · zone " + e.zone +
              " · submitted " + when(e.submitted_unix_ns) + " · report " + in.generated) +
       "</p>";
  if (!e.message.empty()) h += "<pre>" + escape(e.message) + "</pre>";

  h += "<h2>Diagnosis</h2>";
  if (in.findings.empty()) h += "<p class=\"ok\">No problem found (<code>loom diagnose " + escape(e.job) + "</code>).</p>";
  for (const auto& f : in.findings) {
    h += "<div class=\"cause\"><b>" + escape(f.title) + "</b> — " + escape(f.rule) + ", " +
         fixed(100 * f.confidence, "%.0f") + "%" + (f.stage.empty() ? "" : ", stage " + escape(f.stage)) + "<ul>";
    for (const auto& s : f.evidence) h += "<li>" + escape(s) + "</li>";
    h += "</ul><ol>";
    for (const auto& r : f.repair) h += "<li><code>" + escape(r) + "</code></li>";
    h += "</ol></div>";
  }

  h += "<h2>Stages</h2>";
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : e.stages)
    rows.push_back({s.name, s.state, std::to_string(s.step) + "/" + std::to_string(s.total_steps), fixed(s.first_loss),
                    fixed(s.loss), fixed(s.tokens_per_s, "%.0f"), s.node.empty() ? "-" : s.node,
                    std::to_string(s.attempts), s.precision.empty() ? "-" : s.precision});
  h += table({"stage", "state", "step", "first loss", "loss", "tokens/s", "trainer", "attempts", "precision"}, rows);

  // The timeline: each stage from its start to its end (or now), the job's events as ticks.
  const std::uint64_t t0 = e.submitted_unix_ns;
  auto since = [&](std::uint64_t ns) { return ns > t0 ? double(ns - t0) / 1e9 : 0.0; };
  double total = 0;
  std::vector<span> spans;
  for (const auto& s : e.stages) {
    if (!s.started_unix_ns) continue;
    const std::uint64_t end = s.finished_unix_ns ? s.finished_unix_ns : e.now_unix_ns;
    spans.push_back({s.name, since(s.started_unix_ns), since(end), s.state});
    total = std::max(total, since(end));
  }
  std::vector<mark> marks;
  for (const auto& ev : e.events) {
    if (ev.kind == "progress") continue;
    marks.push_back({since(ev.unix_ns), ev.kind + (ev.stage.empty() ? "" : " (" + ev.stage + ")") + ": " + ev.text});
    total = std::max(total, since(ev.unix_ns));
  }
  h += "<h3>Timeline</h3>" + timeline(spans, marks, total);

  h += "<h2>Curves</h2>";
  for (const auto& s : e.stages) {
    if (s.steps.empty()) continue;
    h += "<h3>" + escape(s.name) + "</h3>";
    h += curve(s.name + "/loss", s.name + ": loss", series(s.steps, &diagnose::step_point::loss));
    h += curve(s.name + "/lr", s.name + ": learning rate", series(s.steps, &diagnose::step_point::lr));
    h += curve(s.name + "/tokens_per_s", s.name + ": tokens/s", series(s.steps, &diagnose::step_point::tokens_per_s));
    h += curve(s.name + "/grad_norm", s.name + ": gradient norm", series(s.steps, &diagnose::step_point::grad_norm));
  }
  for (const auto& s : e.stages) {
    if (s.sites.empty()) continue;
    h += "<h3>" + escape(s.name) + ": sites</h3><p class=\"meta\">Each site's loss as the scheduler saw it reported "
         "(at most 512 points, thinned evenly; kept in the scheduler's memory while it runs). Each site's full "
         "metrics log stays at the site.</p>";
    for (const auto& x : s.sites) {
      if (x.curve.empty()) continue;
      std::vector<point> pts;
      for (const auto& [step, loss] : x.curve) pts.push_back({step, loss});
      h += curve(s.name + "/site/" + x.site + "/loss", s.name + ": loss at " + x.site, pts);
    }
    std::vector<std::vector<std::string>> srows;
    for (const auto& x : s.sites)
      srows.push_back({x.site, x.node, std::to_string(x.step), fixed(x.loss), std::to_string(x.round),
                       fixed(x.stall_s, "%.1f"), std::to_string(x.deltas_sent), std::to_string(x.deltas_late),
                       std::to_string(x.deltas_dropped)});
    h += table({"site", "trainer", "step", "loss", "round", "stall s", "deltas sent", "late", "dropped"}, srows);
    if (!s.missing_sites.empty()) {
      std::string m;
      for (const auto& x : s.missing_sites) m += (m.empty() ? "" : ", ") + x;
      h += "<p>Never contributed: " + escape(m) + "</p>";
    }
  }

  h += "<h2>Config and data</h2>";
  for (const auto& s : e.stages) {
    if (!s.config.known) continue;
    std::string data = !s.config.dataset.empty() ? "dataset " + s.config.dataset
                       : !s.config.data_text.empty() ? "text " + s.config.data_text
                                                     : "(see the config)";
    h += "<h3>" + escape(s.name) + "</h3><p>Data: " + escape(data) + "</p><pre>" + escape(s.config.text) + "</pre>";
  }

  h += "<h2>Checkpoints</h2>";
  std::vector<std::vector<std::string>> ck;
  for (const auto& ev : e.events)
    if (ev.kind == "snapshot" || ev.kind == "snapshot_fallback" || ev.kind == "rollback")
      ck.push_back({when(ev.unix_ns), ev.stage, ev.kind, ev.text});
  h += ck.empty() ? "<p>None recorded.</p>" : table({"when", "stage", "what", "where"}, ck);

  h += "<h2>Model versions</h2>";
  std::vector<std::vector<std::string>> mv;
  for (const auto& m : in.models) {
    std::string ds, figs;
    for (const auto& d : m.datasets) ds += (ds.empty() ? "" : ", ") + d;
    for (const auto& [k, v] : m.metrics) figs += (figs.empty() ? "" : ", ") + k + " " + fixed(v, "%.4g");
    mv.push_back({m.version + (m.current ? " (current)" : ""), m.stage, m.kind, std::to_string(m.step),
                  m.params_sha256.substr(0, 16), m.parent.empty() ? "-" : m.parent, ds, figs});
  }
  h += mv.empty() ? "<p>None registered.</p>"
                  : table({"version", "stage", "kind", "step", "params sha256", "parent", "data", "figures"}, mv);

  h += "<h2>Events</h2>";
  std::vector<std::vector<std::string>> evs;
  for (const auto& ev : e.events) evs.push_back({when(ev.unix_ns), ev.stage.empty() ? "-" : ev.stage, ev.kind, ev.text});
  h += table({"when", "stage", "kind", "text"}, evs);

  h += "<h2>Audit trail</h2>";
  std::vector<std::vector<std::string>> au;
  for (const auto& a : e.audit)
    au.push_back({std::to_string(a.seq), when(a.unix_ns), a.action, a.principal, a.service, a.decision, a.reason});
  h += au.empty() ? "<p>None read.</p>" : table({"seq", "when", "action", "principal", "service", "decision", "reason"}, au);

  if (!e.gaps.empty()) {
    h += "<h2>Not seen</h2><ul>";
    for (const auto& g : e.gaps) h += "<li class=\"gap\">" + escape(g) + "</li>";
    h += "</ul>";
  }
  return h + "</body></html>\n";
}

}  // namespace loom::report
