// `loom model list|show|diff|rollback`: the scheduler's model registry
// (services/scheduler/models). Every stage that succeeds leaves a version of
// its job's tenant; the caller sees its tenant's (an admin every tenant's);
// rollback needs the operator role and is audited there, the rest any viewer.
// `check` and `export` are in model_check.cpp and model_export.cpp.
#include "client/cli.hpp"
#include "client/model_check.hpp"
#include "client/typed_call.hpp"

#include "loom/v1/models.pb.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <map>

namespace loom::cli {
namespace {
using nlohmann::json;

json version_json(const loom::v1::ModelVersion& v) {
  json metrics = json::object(), datasets = json::array(), hashes = json::object();
  for (const auto& [k, x] : v.metrics()) metrics[k] = x;
  for (const auto& [d, h] : v.data_sha256()) hashes[d] = h;
  for (const auto& d : v.datasets()) datasets.push_back(d);
  return {{"version", v.version()},           {"model", v.model()},
          {"tenant", v.tenant()},
          {"job_id", v.job_id()},             {"stage", v.stage()},
          {"kind", v.kind()},                 {"checkpoint", v.checkpoint()},
          {"step", v.step()},                 {"manifest_sha256", v.manifest_sha256()},
          {"params_sha256", v.params_sha256()}, {"parent", v.parent()},
          {"datasets", datasets},             {"data_sha256", hashes},
          {"tokenizer", v.tokenizer()},
          {"metrics", metrics},               {"created_unix_ns", v.created_unix_ns()},
          {"current", v.current()},           {"config_toml", v.config_toml()}};
}

std::string metric(const loom::v1::ModelVersion& v, const std::string& k) {
  auto it = v.metrics().find(k);
  if (it == v.metrics().end()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", it->second);
  return buf;
}

int cmd_model_list(context& c) {
  loom::v1::ListModelsRequest req;
  req.set_model(c.a.get_or("model", ""));
  req.set_limit(static_cast<std::uint32_t>(c.a.number("limit").value_or(50)));
  auto rep = typed_call<loom::v1::ListModelsReply>(c, "scheduler", req, 1);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    json arr = json::array();
    for (const auto& v : rep->versions()) arr.push_back(version_json(v));
    print_json({{"versions", arr}});
    return ok_exit;
  }
  std::printf("%-10s %-1s %-20s %-12s %-11s %-10s %-4s %8s %-10s %-16s %s\n", "VERSION", "", "MODEL", "TENANT", "JOB",
              "STAGE", "KIND", "LOSS", "PARENT", "PARAMS_SHA256", "CREATED");
  for (const auto& v : rep->versions())
    std::printf("%-10s %-1s %-20s %-12s %-11s %-10s %-4s %8s %-10s %-16s %s\n", printable(v.version()).c_str(),
                v.current() ? "*" : "", printable(v.model()).c_str(), printable(v.tenant()).c_str(),
                printable(v.job_id()).c_str(),
                printable(v.stage()).c_str(), printable(v.kind()).c_str(), metric(v, "loss").c_str(),
                v.parent().empty() ? "-" : printable(v.parent()).c_str(),
                printable(v.params_sha256().substr(0, 16)).c_str(), when(v.created_unix_ns()).c_str());
  if (rep->versions_size() == 0) std::printf("(no model versions yet: each stage that succeeds leaves one)\n");
  else std::printf("(* = the model's current version in its tenant)\n");
  return ok_exit;
}

int cmd_model_show(context& c) {
  loom::v1::GetModelRequest req;
  req.set_version(c.a.positional.at(2));
  auto rep = typed_call<loom::v1::GetModelReply>(c, "scheduler", req, 1);
  if (!rep) return fail(c, rep.err());
  const auto& v = rep->version();
  if (c.json) {
    print_json(version_json(v));
    return ok_exit;
  }
  std::printf("version     %s%s\nmodel       %s (tenant %s)\njob         %s stage %s (kind %s)\ncheckpoint  %s (step %llu)\n",
              printable(v.version()).c_str(), v.current() ? " (current)" : "", printable(v.model()).c_str(),
              printable(v.tenant()).c_str(),
              printable(v.job_id()).c_str(), printable(v.stage()).c_str(), printable(v.kind()).c_str(),
              printable(v.checkpoint()).c_str(), static_cast<unsigned long long>(v.step()));
  std::printf("params      sha256 %s\nmanifest    sha256 %s\nparent      %s\ntokenizer   %s\ncreated     %s\n",
              printable(v.params_sha256()).c_str(), printable(v.manifest_sha256()).c_str(),
              v.parent().empty() ? "- (fresh initialisation)" : printable(v.parent()).c_str(),
              printable(v.tokenizer()).c_str(), when(v.created_unix_ns()).c_str());
  for (const auto& d : v.datasets()) {
    auto h = v.data_sha256().find(d);
    std::string pin = h == v.data_sha256().end() ? "" : h->second;
    if (pin.size() == 64) pin = (d.rfind("dataset:", 0) == 0 || d.rfind("shards:", 0) == 0 ? "manifest sha256 " : "sha256 ") + pin;
    std::printf("read        %s%s\n", printable(d).c_str(), pin.empty() ? "" : ("  (" + printable(pin) + ")").c_str());
  }
  std::map<std::string, double> metrics(v.metrics().begin(), v.metrics().end());
  for (const auto& [k, x] : metrics) std::printf("metric      %s = %.6g\n", printable(k).c_str(), x);
  std::printf("config:\n%s", indented_lines(v.config_toml(), "  ").c_str());
  return ok_exit;
}

int cmd_model_diff(context& c) {
  loom::v1::DiffModelsRequest req;
  req.set_a(c.a.positional.at(2));
  req.set_b(c.a.positional.at(3));
  auto rep = typed_call<loom::v1::DiffModelsReply>(c, "scheduler", req, 1);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    json diffs = json::array();
    for (const auto& d : rep->differences()) diffs.push_back({{"field", d.field()}, {"a", d.a()}, {"b", d.b()}});
    print_json({{"a", version_json(rep->a())}, {"b", version_json(rep->b())}, {"differences", diffs}});
    return ok_exit;
  }
  std::printf("%-16s %-40s %s\n", "FIELD", printable(rep->a().version()).c_str(), printable(rep->b().version()).c_str());
  for (const auto& d : rep->differences())
    std::printf("%-16s %-40s %s\n", printable(d.field()).c_str(), d.a().empty() ? "-" : printable(d.a()).c_str(),
                d.b().empty() ? "-" : printable(d.b()).c_str());
  if (rep->differences_size() == 0) std::printf("(no differences)\n");
  return ok_exit;
}

int cmd_model_rollback(context& c) {
  loom::v1::RollbackModelRequest req;
  req.set_version(c.a.positional.at(2));
  req.set_reason(c.a.get_or("reason", ""));
  auto rep = typed_call<loom::v1::RollbackModelReply>(c, "scheduler", req, 1);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    print_json({{"current", version_json(rep->current())}, {"previous", rep->previous()}});
    return ok_exit;
  }
  std::printf("model %s: current version is %s again (was %s); its checkpoint verified, params sha256 %s\n",
              printable(rep->current().model()).c_str(), printable(rep->current().version()).c_str(),
              rep->previous().empty() ? "-" : printable(rep->previous()).c_str(),
              printable(rep->current().params_sha256()).c_str());
  return ok_exit;
}

}  // namespace

int cmd_model(context& c) {
  static const std::map<std::string, int (*)(context&)> subcommands = {
      {"list", cmd_model_list},         {"show", cmd_model_show},    {"diff", cmd_model_diff},
      {"rollback", cmd_model_rollback}, {"check", cmd_model_check}, {"export", cmd_model_export}};
  auto it = c.a.positional.size() < 2 ? subcommands.end() : subcommands.find(c.a.positional[1]);
  if (it == subcommands.end())
    return usage("usage: loom model list [--model NAME] [--limit N] | show VERSION | diff A B | rollback VERSION "
                 "[--reason TEXT] | check VERSION [--held-out FILE] [--max-loss X] [--override-compliance --reason TEXT] "
                 "| export VERSION --format hf|gguf [--type f32|f16|q8_0] --out PATH");
  return it->second(c);
}

}  // namespace loom::cli
