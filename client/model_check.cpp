// `loom model check VERSION` and `loom model export VERSION` (issue 16 items
// 6-7). Both run every pre-export check (services/trainer/check) here, on the
// deployment's machine: the version's checkpoint, signing key and import
// reports are read from the data dir. A failed check lists every failure and
// exports nothing. The scheduler records, in the audit log, every export
// (exported or refused) and every check that overrode compliance
// (RecordModelExportRequest; admin for an override); an export reports
// success only after that record is accepted, and removes its output if not.
#include "client/model_check.hpp"
#include "client/typed_call.hpp"

#include "loom/v1/models.pb.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace loom::cli {
namespace {
using modelcheck::check_status;

// A lineage longer than this is a cycle in the registry, not a real history.
constexpr int max_ancestors = 256;

result<loom::v1::ModelVersion> get_version(context& c, const std::string& id) {
  loom::v1::GetModelRequest req;
  req.set_version(id);
  auto rep = typed_call<loom::v1::GetModelReply>(c, "scheduler", req, 1);
  if (!rep) return rep.err();
  return rep->version();
}

result<std::optional<double>> max_loss_option(const context& c) {
  auto text = c.a.get("max-loss");
  if (!text) return std::optional<double>();
  char* end = nullptr;
  const double v = std::strtod(text->c_str(), &end);
  if (text->empty() || *end != '\0' || !std::isfinite(v) || v <= 0)
    return make_error(errc::invalid_argument, "--max-loss must be a positive number, got " + printable(*text));
  return std::optional<double>(v);
}

}  // namespace

// The version, its lineage's data sources and every check's outcome.
result<checked> check_version(context& c, const std::string& id) {
  auto max_loss = max_loss_option(c);
  if (!max_loss) return max_loss.err();
  if (c.a.flag("override-compliance") && c.a.get_or("reason", "").empty())
    return make_error(errc::invalid_argument, "--override-compliance needs --reason TEXT (kept in the audit record)");
  auto v = get_version(c, id);
  if (!v) return v.err();
  checked out;
  out.version = v->version();
  out.model = v->model();
  out.checkpoint = v->checkpoint();
  modelcheck::check_request r;
  r.data_dir = c.paths.root;
  r.checkpoint = v->checkpoint();
  r.params_sha256 = v->params_sha256();
  r.config_toml = v->config_toml();
  r.tokenizer = v->tokenizer();
  r.data.assign(v->datasets().begin(), v->datasets().end());
  r.lineage = r.data;
  std::string parent = v->parent();
  for (int hops = 0; !parent.empty(); ++hops) {
    if (hops == max_ancestors)
      return make_error(errc::corruption, "the lineage of " + id + " is longer than 256 versions (a cycle?)");
    auto p = get_version(c, parent);
    if (!p) return make_error(p.code(), "lineage of " + id + ": " + p.err().message);
    if (hops == 0) r.parent_checkpoint = p->checkpoint();
    r.lineage.insert(r.lineage.end(), p->datasets().begin(), p->datasets().end());
    parent = p->parent();
  }
  r.held_out_file = c.a.get_or("held-out", "");
  r.max_loss = *max_loss;
  r.override_compliance = c.a.flag("override-compliance");
  out.report = modelcheck::run_checks(r);
  return out;
}

nlohmann::json checks_json(const modelcheck::check_report& rep) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& k : rep.checks)
    arr.push_back({{"name", k.name}, {"status", std::string(to_string(k.status))}, {"detail", k.detail},
                   {"seconds", k.seconds}});
  return arr;
}

void print_checks(const checked& ck) {
  std::printf("model %s version %s (checkpoint %s)\n", printable(ck.model).c_str(), printable(ck.version).c_str(),
              printable(ck.checkpoint).c_str());
  for (const auto& k : ck.report.checks)
    std::printf("  %-14s %-12s %s\n", k.name.c_str(), std::string(to_string(k.status)).c_str(),
                printable(k.detail).c_str());
  const auto failed = ck.report.failures();
  std::printf("%zu checks in %.2f s: %s\n", ck.report.checks.size(), ck.report.seconds,
              failed.empty() ? "all passed" : (std::to_string(failed.size()) + " failed").c_str());
}

bool overridden(const modelcheck::check_report& rep) {
  for (const auto& k : rep.checks)
    if (k.status == check_status::overridden) return true;
  return false;
}

status record(context& c, const checked& ck, const std::string& action, const std::string& outcome,
              const std::string& format, const std::string& type, const std::string& out,
              const std::string& sha256, std::uint64_t bytes) {
  loom::v1::RecordModelExportRequest req;
  req.set_version(ck.version);
  req.set_action(action);
  req.set_outcome(outcome);
  req.set_format(format);
  req.set_type(type);
  req.set_out(out);
  req.set_output_sha256(sha256);
  req.set_output_bytes(bytes);
  for (const auto& k : ck.report.checks) {
    auto* m = req.add_checks();
    m->set_name(k.name);
    m->set_status(std::string(to_string(k.status)));
    m->set_detail(k.detail);
  }
  req.set_override_compliance(overridden(ck.report));
  req.set_reason(c.a.get_or("reason", ""));
  auto rep = typed_call<loom::v1::RecordModelExportReply>(c, "scheduler", req, 1);
  if (!rep) return rep.err();
  return ok_status();
}

int cmd_model_check(context& c) {
  auto ck = check_version(c, c.a.positional.at(2));
  if (!ck) return fail(c, ck.err());
  if (overridden(ck->report))  // an override is an act: audited, and refused without the admin role
    if (auto st = record(c, *ck, "check", ck->report.passed() ? "passed" : "failed", "", "", "", "", 0); !st)
      return fail(c, make_error(st.code(), "the compliance override was not recorded: " + st.err().message));
  if (c.json)
    print_json({{"version", ck->version}, {"passed", ck->report.passed()},
                {"seconds", ck->report.seconds}, {"checks", checks_json(ck->report)}});
  else
    print_checks(*ck);
  return ck->report.passed() ? ok_exit : error_exit;
}

}  // namespace loom::cli
