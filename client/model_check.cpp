// `loom model check VERSION` (issue 16 item 6; issue 25 item 3): the cloud's
// trainer runs every pre-export check on the cloud's data and records the
// outcome in the audit log (through the scheduler); this command starts it,
// waits, and prints every check. Also the start-and-wait that `loom model
// export` (model_export.cpp) shares.
#include "client/model_check.hpp"
#include "client/typed_call.hpp"

#include "loom/v1/models.pb.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

namespace loom::cli {
namespace {

// The trainer that runs checks and exports: the deployment's first.
constexpr const char* export_service = "trainer";
// How long a check or an export may run before the client stops waiting
// (a d12's checks take about a minute on a loaded 2-core box; the trainer
// runs one at a time, so a few may queue).
constexpr std::chrono::minutes max_wait{30};

result<std::optional<double>> max_loss_option(const context& c) {
  auto text = c.a.get("max-loss");
  if (!text) return std::optional<double>();
  char* end = nullptr;
  const double v = std::strtod(text->c_str(), &end);
  if (text->empty() || *end != '\0' || !std::isfinite(v) || v <= 0)
    return make_error(errc::invalid_argument, "--max-loss must be a positive number, got " + printable(*text));
  return std::optional<double>(v);
}

trainer_export from_wire(const loom::v1::ModelExportInfo& i) {
  trainer_export e;
  e.id = i.id();
  e.state = i.state();
  e.version = i.version();
  e.model = i.model();
  e.checkpoint = i.checkpoint();
  e.trainer = i.trainer();
  e.output_sha256 = i.output_sha256();
  for (const auto& k : i.checks()) e.checks.push_back({k.name(), k.status(), k.detail(), k.seconds()});
  for (const auto& f : i.files()) e.files.push_back({f.name(), f.bytes(), f.sha256()});
  e.passed = i.passed();
  e.recorded = i.recorded();
  e.output_bytes = i.output_bytes();
  e.check_seconds = i.check_seconds();
  e.export_seconds = i.export_seconds();
  return e;
}

}  // namespace

result<trainer_export> run_on_trainer(context& c, const std::string& action, const std::string& version,
                                      const std::string& format, const std::string& type, const std::string& out) {
  auto max_loss = max_loss_option(c);
  if (!max_loss) return max_loss.err();
  if (c.a.flag("override-compliance") && c.a.get_or("reason", "").empty())
    return make_error(errc::invalid_argument, "--override-compliance needs --reason TEXT (kept in the audit record)");
  loom::v1::StartModelExportRequest req;
  req.set_version(version);
  req.set_action(action);
  req.set_format(format);
  req.set_type(type);
  req.set_held_out(c.a.get_or("held-out", ""));
  if (*max_loss) req.set_max_loss(**max_loss);
  req.set_override_compliance(c.a.flag("override-compliance"));
  req.set_reason(c.a.get_or("reason", ""));
  req.set_out(out);
  // A retry with the same request id would queue it twice: sent once.
  auto started = typed_call<loom::v1::StartModelExportReply>(c, export_service, req, 0);
  if (!started) return started.err();
  const std::string id = started->info().id();
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  auto pause = std::chrono::milliseconds(50);
  for (;;) {
    loom::v1::GetModelExportRequest get;
    get.set_id(id);
    auto rep = typed_call<loom::v1::GetModelExportReply>(c, export_service, get, 2);
    if (!rep) return make_error(rep.code(), "model " + action + " " + id + ": " + rep.err().message);
    const auto& i = rep->info();
    if (i.state() == "failed")
      return make_error(static_cast<errc>(static_cast<int>(i.error().code())), i.error().message());
    if (i.state() == "cancelled") return make_error(errc::unavailable, "model " + action + " " + id + " was cancelled");
    if (i.state() == "done") return from_wire(i);
    if (std::chrono::steady_clock::now() > deadline) {
      end_on_trainer(c, id);
      return make_error(errc::deadline_exceeded, "model " + action + " " + id + " on " + i.trainer() +
                                                     " did not end within 30 minutes (phase " + i.phase() + "): cancelled");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

void end_on_trainer(context& c, const std::string& id) {
  loom::v1::EndModelExportRequest req;
  req.set_id(id);
  auto rep = typed_call<loom::v1::EndModelExportReply>(c, export_service, req, 1);
  if (!rep)  // the trainer deletes it within the hour anyway
    std::fprintf(stderr, "warning: the trainer keeps its copy of %s for up to an hour: %s\n", printable(id).c_str(),
                 printable(rep.err().message).c_str());
}

nlohmann::json checks_json(const trainer_export& e) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& k : e.checks)
    arr.push_back({{"name", k.name}, {"status", k.status}, {"detail", k.detail}, {"seconds", k.seconds}});
  return arr;
}

void print_checks(const trainer_export& e) {
  std::printf("model %s version %s (checkpoint %s; checked by %s)\n", printable(e.model).c_str(),
              printable(e.version).c_str(), printable(e.checkpoint).c_str(), printable(e.trainer).c_str());
  std::size_t failed = 0;
  for (const auto& k : e.checks) {
    std::printf("  %-14s %-12s %s\n", printable(k.name).c_str(), printable(k.status).c_str(), printable(k.detail).c_str());
    failed += k.status == "fail";
  }
  std::printf("%zu checks in %.2f s: %s\n", e.checks.size(), e.check_seconds,
              failed == 0 ? "all passed" : (std::to_string(failed) + " failed").c_str());
}

int cmd_model_check(context& c) {
  auto e = run_on_trainer(c, "check", c.a.positional.at(2), "", "", "");
  if (!e) return fail(c, e.err());
  if (c.json)
    print_json({{"version", e->version}, {"passed", e->passed}, {"seconds", e->check_seconds},
                {"checks", checks_json(*e)}, {"recorded", e->recorded}, {"export_id", e->id}, {"trainer", e->trainer}});
  else
    print_checks(*e);
  return e->passed ? ok_exit : error_exit;
}

}  // namespace loom::cli
