#include "services/ingest/pipeline/report.hpp"

#include <nlohmann/json.hpp>

namespace loom::ingest {
namespace {

void add_all(std::map<std::string, std::uint64_t>& to, const std::map<std::string, std::uint64_t>& from) {
  for (const auto& [k, v] : from) to[k] += v;
}

}  // namespace

void import_report::add_problem(report_line l) {
  if (problems.size() < max_listed) problems.push_back(std::move(l));
  else ++problems_not_listed;
}

void import_report::merge(const import_report& o) {
  files += o.files;
  bytes_decoded += o.bytes_decoded;
  documents += o.documents;
  kept += o.kept;
  rejected += o.rejected;
  quarantined += o.quarantined;
  bytes_kept += o.bytes_kept;
  add_all(reader_rejections, o.reader_rejections);
  add_all(rejected_by_rule, o.rejected_by_rule);
  add_all(quarantined_by_reason, o.quarantined_by_reason);
  add_all(lines_removed_by_rule, o.lines_removed_by_rule);
  add_all(licences, o.licences);
  documents_with_copyright += o.documents_with_copyright;
  cleaning += o.cleaning;
  annotations.sft_records += o.annotations.sft_records;
  annotations.sft_valid += o.annotations.sft_valid;
  annotations.preference_records += o.annotations.preference_records;
  annotations.preference_valid += o.annotations.preference_valid;
  add_all(annotations.errors_by_code, o.annotations.errors_by_code);
  for (const auto& p : o.problems) add_problem(p);
  problems_not_listed += o.problems_not_listed;
}

std::string import_report::to_json(int indent) const {
  using json = nlohmann::ordered_json;
  json j;
  j["files"] = files;
  j["bytes_decoded"] = bytes_decoded;
  j["documents"] = {{"read", documents}, {"kept", kept}, {"rejected", rejected}, {"quarantined", quarantined}};
  j["bytes_kept"] = bytes_kept;
  j["reader_rejections"] = reader_rejections;
  j["rejected_by_rule"] = rejected_by_rule;
  j["quarantined_by_reason"] = quarantined_by_reason;
  j["lines_removed_by_rule"] = lines_removed_by_rule;
  j["cleaning"] = {{"utf8_replacements", cleaning.utf8_replacements},
                   {"controls_removed", cleaning.controls_removed},
                   {"nfc_changed", cleaning.nfc_changed}};
  j["licences"] = licences;
  j["documents_with_copyright"] = documents_with_copyright;
  j["annotations"] = {
      {"sft", {{"records", annotations.sft_records}, {"valid", annotations.sft_valid}}},
      {"preference", {{"records", annotations.preference_records}, {"valid", annotations.preference_valid}}},
      {"pass_rate", annotations.pass_rate()},
      {"errors_by_code", annotations.errors_by_code}};
  json list = json::array();
  for (const auto& p : problems)
    list.push_back({{"stage", p.stage}, {"file", p.file}, {"line", p.line}, {"code", p.code}, {"message", p.message}});
  j["problems"] = std::move(list);
  j["problems_not_listed"] = problems_not_listed;
  // Messages can quote undecodable input: replace rather than throw.
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace loom::ingest
