// `loom job submit|list|show|cancel|watch|logs`: training jobs at the
// scheduler. Templates are TOML files found by client/templates.hpp; the
// client sends the template's text, so the scheduler needs no access to this
// machine's files. `job show` adds each alignment stage's held-out eval
// (before -> after) from the model registry's versions of the job, and an hpo
// stage's best trial from its typed field (job_hpo.hpp).
#include "client/cli.hpp"
#include "libs/status/unix_time.hpp"
#include "client/typed_call.hpp"

#include "client/input.hpp"
#include "client/job_hpo.hpp"
#include "client/templates.hpp"
#include "libs/files/files.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/models.pb.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>
#include <utility>

namespace loom::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

template <class M>
result<M> scheduler_call(context& c, const google::protobuf::Message& req, const std::string& request_id = "") {
  return typed_call<M>(c, "scheduler", req, 1, request_id);
}

// A stage holds its text file whole (text=FILE, sft=FILE): past this it would
// exhaust the trainer, so the submit is refused here, before any job exists.
constexpr std::uint64_t max_stage_text_bytes = std::uint64_t{1} << 30;

// Every text file the overrides name must be a regular file of at most
// max_stage_text_bytes: a device or a pipe (/dev/zero) may never end.
status check_text_files(const loom::v1::SubmitJobRequest& req) {
  for (const auto& kv : req.overrides()) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = kv.substr(0, eq), file = kv.substr(eq + 1);
    const std::string last = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
    if (last != "text" && last != "sft") continue;
    std::error_code ec;
    const auto st = fs::status(file, ec);
    if (ec || !fs::exists(st)) continue;  // the trainer reports a missing file, naming it
    if (!fs::is_regular_file(st))
      return make_error(errc::invalid_argument, "--set " + kv + ": " + file +
                                                    " is not a regular file (a device or a pipe may never end)");
    if (const auto n = fs::file_size(file, ec); !ec && n > max_stage_text_bytes)
      return make_error(errc::invalid_argument, "--set " + kv + ": " + file + " is larger than " +
                                                    size_text(max_stage_text_bytes) + " (the most a stage reads)");
  }
  return ok_status();
}

std::string fmt_time(std::uint64_t ns) {
  if (ns == 0) return "-";
  std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

// A diloco stage's site as its trainer last reported it.
json to_json(const loom::v1::SiteProgress& x) {
  return {{"site", x.site()},           {"node", x.node()},
          {"step", x.step()},           {"loss", x.loss()},
          {"bytes_sent", x.bytes_sent()}, {"bytes_received", x.bytes_received()},
          {"stall_s", x.stall_s()},     {"round", x.round()},
          {"deltas_sent", x.deltas_sent()}, {"deltas_deferred", x.deltas_deferred()},
          {"deltas_late", x.deltas_late()}, {"deltas_dropped", x.deltas_dropped()}};
}

// Bytes as the site lines show them: "812 B", "8.6 MB".
std::string bytes_text(std::uint64_t b) {
  char buf[32];
  if (b < 1000) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  else if (b < 1000 * 1000) std::snprintf(buf, sizeof buf, "%.1f kB", double(b) / 1e3);
  else if (b < 1000ull * 1000 * 1000) std::snprintf(buf, sizeof buf, "%.1f MB", double(b) / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2f GB", double(b) / 1e9);
  return buf;
}

// One line per site of a diloco stage, under a header: site, step, loss,
// bytes sent, stall seconds, outer round (fragment 0's version), trainer.
std::string site_lines(const loom::v1::StageInfo& s, const char* indent) {
  if (s.sites().empty()) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s%-10s %7s %9s %11s %8s %6s  %s\n", indent, "site", "step", "loss", "bytes sent",
                "stall s", "round", "trainer");
  std::string out = buf;
  for (const auto& x : s.sites()) {
    std::snprintf(buf, sizeof buf, "%s%-10s %7llu %9.4f %11s %8.2f %6llu  %s\n", indent, printable(x.site()).c_str(),
                  static_cast<unsigned long long>(x.step()), x.loss(), bytes_text(x.bytes_sent()).c_str(), x.stall_s(),
                  static_cast<unsigned long long>(x.round()), x.node().empty() ? "-" : printable(x.node()).c_str());
    out += buf;
  }
  return out;
}

json to_json(const loom::v1::JobInfo& j) {
  json stages = json::array();
  for (const auto& s : j.stages()) {
    json members = json::array(), sites = json::array(), contributed = json::array(), missing = json::array();
    for (const auto& m : s.members()) members.push_back(m);
    for (const auto& x : s.sites()) sites.push_back(to_json(x));
    for (const auto& c : s.contributed_sites()) contributed.push_back(c);
    for (const auto& m : s.missing_sites()) missing.push_back(m);
    stages.push_back({{"name", s.name()},
                      {"state", s.state()},
                      {"step", s.step()},
                      {"total_steps", s.total_steps()},
                      {"loss", s.loss()},
                      {"first_loss", s.first_loss()},
                      {"tokens_per_s", s.tokens_per_s()},
                      {"node", s.node()},
                      {"checkpoint", s.checkpoint()},
                      {"precision", s.precision()},
                      {"attempts", s.attempts()},
                      {"started_unix_ns", s.started_unix_ns()},
                      {"finished_unix_ns", s.finished_unix_ns()},
                      {"members", members},
                      {"min_trainers", s.min_trainers()},
                      {"max_trainers", s.max_trainers()},
                      {"generation", s.generation()},
                      {"waiting", s.waiting()},
                      {"memory_bytes", s.memory_bytes()},
                      {"sites", sites},
                      {"contributed_sites", contributed},
                      {"missing_sites", missing}});
    if (s.has_hpo_best()) {  // an hpo stage whose search is done: its best trial, in words and typed
      stages.back()["hpo_best"] = hpo_best_line(s.hpo_best());
      stages.back()["best_trial"] = hpo_best_json(s.hpo_best());
    }
  }
  return {{"id", j.id()},
          {"name", j.name()},
          {"template", j.template_name()},
          {"state", j.state()},
          {"tenant", j.tenant()},
          {"priority_class", j.priority_class()},
          {"zone", j.zone()},
          {"principal", j.principal()},
          {"message", j.message()},
          {"out_dir", j.out_dir()},
          {"submitted_unix_ns", j.submitted_unix_ns()},
          {"updated_unix_ns", j.updated_unix_ns()},
          {"stages", stages}};
}

void print_job(const loom::v1::JobInfo& j) {
  std::printf("%s  %s  (template %s, %s priority, tenant %s)\n", printable(j.id()).c_str(),
              printable(j.state()).c_str(), printable(j.template_name()).c_str(), printable(j.priority_class()).c_str(),
              printable(j.tenant()).c_str());
  std::fputs(indented_lines(j.message(), "  ").c_str(), stdout);  // a failure's message whole, line by line
  std::printf("  submitted %s by %s; output %s\n", fmt_time(j.submitted_unix_ns()).c_str(),
              printable(j.principal()).c_str(), printable(j.out_dir()).c_str());
  std::printf("  %-10s %-10s %12s %9s %9s %10s %-16s %-8s %-8s %s\n", "stage", "state", "step", "loss", "from",
              "tokens/s", "node", "trainers", "attempts", "precision");
  for (const auto& s : j.stages()) {
    // Trainers: running/wanted — "2/2" a gang, "3/1-4" an elastic group.
    char group[32];
    const unsigned running = static_cast<unsigned>(s.members_size());
    if (s.min_trainers() == s.max_trainers())
      std::snprintf(group, sizeof group, "%u/%u", running, s.max_trainers());
    else
      std::snprintf(group, sizeof group, "%u/%u-%u", running, s.min_trainers(), s.max_trainers());
    std::printf("  %-10s %-10s %5llu/%-6llu %9.4f %9.4f %10.0f %-16s %-8s %-8u %s\n", printable(s.name()).c_str(),
                printable(s.state()).c_str(), static_cast<unsigned long long>(s.step()),
                static_cast<unsigned long long>(s.total_steps()), s.loss(), s.first_loss(), s.tokens_per_s(),
                s.node().empty() ? "-" : printable(s.node()).c_str(), group, s.attempts(),
                s.precision().empty() ? "-" : printable(s.precision()).c_str());
    if (!s.waiting().empty()) std::printf("  %-10s waiting: %s\n", "", printable(s.waiting()).c_str());
    std::fputs(site_lines(s, "    ").c_str(), stdout);
    if (!s.missing_sites().empty()) {  // a diloco stage that ended with fewer sites (diloco.min_sites)
      std::string c, m;
      for (const auto& x : s.contributed_sites()) c += (c.empty() ? "" : ", ") + printable(x);
      for (const auto& x : s.missing_sites()) m += (m.empty() ? "" : ", ") + printable(x);
      std::printf("  %-10s contributed: %s; never contributed: %s (diloco.min_sites)\n", "", c.c_str(), m.c_str());
    }
  }
}

bool terminal(const std::string& state) { return state == "succeeded" || state == "failed" || state == "cancelled"; }

int job_submit(context& c) {
  auto tname = c.a.get("template");
  if (!tname) return usage(usage_line(*c.a.command));
  auto t = find_template(c, *tname);
  if (!t) return fail(c, t.err());
  loom::v1::SubmitJobRequest req;
  req.set_template_name(t->name);
  req.set_template_toml(t->text);
  for (const auto& kv : c.a.all("set")) req.add_overrides(absolute_override(kv));
  req.set_priority_class(c.a.get_or("priority", ""));
  req.set_tenant(c.a.get_or("tenant", ""));
  req.set_zone(c.a.get_or("zone", ""));
  if (auto st = check_text_files(req); !st) return fail(c, st.err());
  auto rep = scheduler_call<loom::v1::SubmitJobReply>(c, req, c.a.get_or("request-id", ""));
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    json j = to_json(rep->job());
    j["existed"] = rep->existed();
    print_json(j);
  } else {
    std::printf("%s %s (%s)%s\n", printable(rep->job().id()).c_str(), printable(rep->job().state()).c_str(),
                printable(rep->job().name()).c_str(),
                rep->existed() ? " — already submitted with this request id" : "");
  }
  return ok_exit;
}

int job_list(context& c) {
  loom::v1::ListJobsRequest req;
  req.set_state(c.a.get_or("state", ""));
  auto rep = scheduler_call<loom::v1::ListJobsReply>(c, req);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    json all = json::array();
    for (const auto& j : rep->jobs()) all.push_back(to_json(j));
    print_json({{"jobs", all}});
    return ok_exit;
  }
  std::printf("%-12s %-10s %-16s %-20s %s\n", "id", "state", "name", "submitted", "stages");
  for (const auto& j : rep->jobs()) {
    std::string stages;
    for (const auto& s : j.stages()) stages += (stages.empty() ? "" : " ") + s.name() + ":" + s.state();
    std::printf("%-12s %-10s %-16s %-20s %s\n", printable(j.id()).c_str(), printable(j.state()).c_str(),
                printable(j.name()).c_str(), fmt_time(j.submitted_unix_ns()).c_str(), printable(stages).c_str());
  }
  return ok_exit;
}

result<loom::v1::GetJobReply> get_job(context& c, const std::string& id, std::uint64_t after = 0) {
  loom::v1::GetJobRequest req;
  req.set_id(id);
  req.set_events_after(after);
  return scheduler_call<loom::v1::GetJobReply>(c, req);
}

// A stage's held-out evaluation as the model registry holds it (its version's
// eval_before_K / eval_after_K metrics, from the eval.json an alignment stage
// writes): figure K -> {before, after}; NaN where one side is missing.
struct stage_eval {
  std::string kind;
  std::map<std::string, std::pair<double, double>> figures;
};

// The held-out evals of `j`'s registered stages, by stage name. Empty when the
// registry has none or cannot be asked (an older scheduler, a role without
// model access): `job show` then shows the job without them.
std::map<std::string, stage_eval> stage_evals(context& c, const loom::v1::JobInfo& j) {
  std::map<std::string, stage_eval> out;
  loom::v1::ListModelsRequest req;
  req.set_model(j.name());
  auto rep = typed_call<loom::v1::ListModelsReply>(c, "scheduler", req, 1);
  if (!rep) return out;
  const double none = std::nan("");
  for (const auto& v : rep->versions()) {
    if (v.job_id() != j.id()) continue;
    for (const auto& [k, x] : v.metrics()) {
      const bool before = k.starts_with("eval_before_"), after = k.starts_with("eval_after_");
      if (!before && !after) continue;
      stage_eval& e = out[v.stage()];
      e.kind = v.kind();
      auto& f = e.figures.try_emplace(k.substr(before ? 12 : 11), none, none).first->second;
      (before ? f.first : f.second) = x;
    }
  }
  return out;
}

// One line for a stage's eval, in the words of its kind: "dpo: preference
// accuracy 0.50 -> 0.75, KL 0.228"; other kinds list every figure.
std::string eval_line(const std::string& stage, const stage_eval& e) {
  auto num = [](double v, const char* f) {
    char b[32];
    if (std::isnan(v)) return std::string("-");
    std::snprintf(b, sizeof b, f, v);
    return std::string(b);
  };
  auto has = [&](const std::string& k) { return e.figures.count(k) > 0; };
  auto move = [&](const std::string& k, const char* f) {
    const auto& [b, a] = e.figures.at(k);
    return num(b, f) + " -> " + num(a, f);
  };
  std::string line = printable(stage) + ": ";
  if (e.kind == "dpo" && has("accuracy")) {
    line += "preference accuracy " + move("accuracy", "%.2f");
    if (has("kl")) line += ", KL " + num(e.figures.at("kl").second, "%.3g");
  } else if (e.kind == "rm" && has("accuracy")) {
    line += "reward-model accuracy " + move("accuracy", "%.2f");
    if (has("margin")) line += ", margin " + move("margin", "%.3g");
  } else if (e.kind == "rl" && has("mean_reward")) {
    line += "mean reward " + move("mean_reward", "%.3f");
    if (has("reward_std")) line += " (initial std " + num(e.figures.at("reward_std").first, "%.3f") + ")";
    if (has("kl")) line += ", KL " + num(e.figures.at("kl").second, "%.3g");
  } else {
    std::string sep;
    for (const auto& [k, f] : e.figures) line += std::exchange(sep, ", ") + printable(k) + " " + move(k, "%.4g");
  }
  return line;
}

int job_show(context& c) {
  if (c.a.positional.size() < 3) return usage(usage_line(*c.a.command));
  auto rep = get_job(c, c.a.positional[2]);
  if (!rep) return fail(c, rep.err());
  const auto evals = stage_evals(c, rep->job());
  if (c.json) {
    json j = to_json(rep->job());
    for (auto& s : j["stages"]) {
      const auto it = evals.find(s["name"].get<std::string>());
      if (it == evals.end()) continue;
      json before = json::object(), after = json::object();
      for (const auto& [k, f] : it->second.figures) {
        if (!std::isnan(f.first)) before[k] = f.first;
        if (!std::isnan(f.second)) after[k] = f.second;
      }
      s["eval"] = {{"before", before}, {"after", after}};
    }
    print_json(j);
    return ok_exit;
  }
  print_job(rep->job());
  for (const auto& s : rep->job().stages())  // an hpo stage's best trial (the typed field)
    if (s.has_hpo_best())
      std::printf("  %s (hpo): %s\n", printable(s.name()).c_str(), printable(hpo_best_line(s.hpo_best())).c_str());
  if (!evals.empty()) std::printf("  held-out eval (before -> after):\n");
  for (const auto& s : rep->job().stages())
    if (auto it = evals.find(s.name()); it != evals.end()) std::printf("    %s\n", eval_line(s.name(), it->second).c_str());
  return ok_exit;
}

int job_cancel(context& c) {
  if (c.a.positional.size() < 3) return usage(usage_line(*c.a.command));
  loom::v1::CancelJobRequest req;
  req.set_id(c.a.positional[2]);
  req.set_reason(c.a.get_or("reason", "cancelled by the user"));
  // A retried cancel with the same --request-id is done once (the scheduler deduplicates by it).
  auto rep = scheduler_call<loom::v1::CancelJobReply>(c, req, c.a.get_or("request-id", ""));
  if (!rep) return fail(c, rep.err());
  if (c.json) print_json(to_json(rep->job()));
  else std::printf("%s %s\n", printable(rep->job().id()).c_str(), printable(rep->job().state()).c_str());
  return ok_exit;
}

void print_event(const loom::v1::JobEvent& e) {
  std::printf("%s  %-8s %-16s %s\n", fmt_time(e.unix_ns()).c_str(),
              e.stage().empty() ? "-" : printable(e.stage()).c_str(), printable(e.kind()).c_str(),
              printable(e.text()).c_str());
}

int job_logs(context& c) {
  if (c.a.positional.size() < 3) return usage(usage_line(*c.a.command));
  auto rep = get_job(c, c.a.positional[2]);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    json all = json::array();
    for (const auto& e : rep->events())
      all.push_back({{"seq", e.seq()}, {"unix_ns", e.unix_ns()}, {"stage", e.stage()}, {"kind", e.kind()}, {"text", e.text()}});
    print_json({{"id", rep->job().id()}, {"events", all}});
    return ok_exit;
  }
  for (const auto& e : rep->events()) print_event(e);
  return ok_exit;
}

// Live progress until the job ends: one line per stage change, a redrawn bar on a terminal.
int job_watch(context& c) {
  if (c.a.positional.size() < 3) return usage(usage_line(*c.a.command));
  const std::string id = c.a.positional[2];
  const auto interval = c.a.duration("interval").value_or(std::chrono::seconds(1));
  const bool tty = ::isatty(1) && !c.json;
  std::uint64_t seen = 0;
  std::map<std::string, std::uint64_t> shown;  // not a terminal: a stage's line only when its step moved
  int site_rows = 0;                             // a terminal: the site lines under the bar, redrawn
  for (;;) {
    auto rep = get_job(c, id, seen);
    if (!rep) return fail(c, rep.err());
    if (tty && site_rows > 0) std::printf("\033[%dF", site_rows);  // back to the bar's line
    if (tty) std::printf("\r\033[J");                               // and clear it and what is under it
    site_rows = 0;
    for (const auto& e : rep->events()) {
      seen = std::max(seen, e.seq());
      if (c.json) {
        print_json({{"event", e.kind()}, {"stage", e.stage()}, {"text", e.text()}});
      } else if (e.kind() != "snapshot") {
        print_event(e);
      }
    }
    const auto& j = rep->job();
    for (const auto& s : j.stages()) {
      if (s.state() != "running") continue;
      const double frac = s.total_steps() ? double(s.step()) / double(s.total_steps()) : 0;
      const double eta = s.tokens_per_s() > 0 && s.step() > 0 && frac > 0
                             ? (std::chrono::duration<double>(loom::wall_now().time_since_epoch()).count() -
                                double(s.started_unix_ns()) / 1e9) * (1 - frac) / frac
                             : 0;
      if (c.json) {
        json sites = json::array();
        for (const auto& x : s.sites()) sites.push_back(to_json(x));
        print_json({{"stage", s.name()}, {"step", s.step()}, {"total_steps", s.total_steps()},
                    {"loss", s.loss()}, {"tokens_per_s", s.tokens_per_s()}, {"sites", sites}});
      } else {
        if (!tty) {
          auto it = shown.find(s.name());
          if (it != shown.end() && it->second == s.step()) continue;
          shown[s.name()] = s.step();
        }
        const int width = 30, fill = static_cast<int>(std::lround(frac * width));
        std::printf("%s%-8s [%s%s] %5llu/%llu  loss %.4f  %.0f tok/s  ETA %.0fs%s", tty ? "" : "",
                    printable(s.name()).c_str(),
                    std::string(static_cast<std::size_t>(fill), '#').c_str(),
                    std::string(static_cast<std::size_t>(width - fill), '.').c_str(),
                    static_cast<unsigned long long>(s.step()), static_cast<unsigned long long>(s.total_steps()),
                    s.loss(), s.tokens_per_s(), eta, tty ? "" : "\n");
        std::string lines = site_lines(s, "  ");  // a diloco stage: one line per site
        if (tty && !lines.empty()) {  // under the bar; the cursor stays at the end of the last
          lines.pop_back();
          std::string drawn;
          for (std::size_t at = 0; at <= lines.size();) {
            const std::size_t end = std::min(lines.find('\n', at), lines.size());
            drawn += "\n" + lines.substr(at, end - at);
            ++site_rows;
            at = end + 1;
          }
          lines = drawn;
        }
        std::fputs(lines.c_str(), stdout);
      }
    }
    std::fflush(stdout);
    if (terminal(j.state())) {
      if (tty && site_rows > 0) std::printf("\033[%dF", site_rows);
      if (tty) std::printf("\r\033[J");
      if (!c.json) print_job(j);
      return j.state() == "succeeded" ? ok_exit : error_exit;
    }
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace

int cmd_job(context& c) {
  static const std::map<std::string, int (*)(context&)> subs = {
      {"submit", job_submit}, {"list", job_list}, {"show", job_show},
      {"cancel", job_cancel}, {"watch", job_watch}, {"logs", job_logs}};
  const char* line = "usage: loom job submit|list|show|cancel|watch|logs ...";
  if (c.a.positional.size() < 2) return usage(line);
  auto it = subs.find(c.a.positional[1]);
  if (it == subs.end()) return usage("loom job: unknown subcommand '" + printable(c.a.positional[1]) + "'\n" + line);
  return it->second(c);
}

}  // namespace loom::cli
