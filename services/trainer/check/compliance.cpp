#include "services/trainer/check/compliance.hpp"

#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <set>

namespace loom::modelcheck {

void assess_import_report(std::string_view report_json, const std::string& name, compliance_finding& out) {
  auto j = nlohmann::json::parse(report_json, nullptr, false);
  if (!j.is_object() || j.value("format", "") != "loom-ingest-report") {
    out.problems.push_back("dataset " + name + ": its import report is not a loom-ingest-report");
    return;
  }
  const auto& lic = j.value("licences", nlohmann::json::object());
  const auto& pii = j.value("pii", nlohmann::json::object());
  const std::uint64_t quarantined = lic.value("quarantined", std::uint64_t{0});
  bool clean = true;
  if (quarantined > 0) {
    std::string deny;
    for (const auto& d : lic.value("deny", nlohmann::json::array()))
      if (d.is_string()) deny += (deny.empty() ? "" : ", ") + d.get<std::string>();
    out.problems.push_back("dataset " + name + ": its import quarantined " + std::to_string(quarantined) +
                           " document(s) under denied licences (" + (deny.empty() ? "-" : deny) + ")");
    clean = false;
  }
  if (!pii.value("enabled", false)) {
    out.problems.push_back("dataset " + name + " was imported with PII redaction off (--no-pii): PII in it is unredacted");
    clean = false;
  }
  if (clean)
    out.notes.push_back("dataset " + name + ": no licence quarantined, PII redacted (" +
                        std::to_string(pii.value("items_redacted", std::uint64_t{0})) + " items)");
}

compliance_finding assess_lineage(const std::vector<std::string>& lineage, const std::string& datasets_root) {
  compliance_finding out;
  std::set<std::string> seen;
  for (const auto& entry : lineage) {
    if (!seen.insert(entry).second) continue;
    const auto colon = entry.find(':');
    const std::string kind = entry.substr(0, colon), what = colon == std::string::npos ? "" : entry.substr(colon + 1);
    if (kind == "prefs" && what.rfind("synthetic", 0) == 0) continue;  // generated here: no outside data
    if (kind != "dataset") {
      out.not_assessed.push_back(entry + " (a raw file, not an ingested dataset: no licence or PII report)");
      continue;
    }
    if (what.empty() || what.find('/') != std::string::npos || what == "..") {
      out.problems.push_back("lineage entry " + entry + " does not name a dataset");
      continue;
    }
    const std::string path = datasets_root + "/" + what + "/report.json";
    auto text = files::read_file(path);
    if (!text) {
      out.problems.push_back("dataset " + what + ": no import report at " + path + " (" + text.err().message + ")");
      continue;
    }
    assess_import_report(*text, what, out);
  }
  return out;
}

}  // namespace loom::modelcheck
