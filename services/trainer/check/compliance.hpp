// compliance: whether what a model's lineage read may leave the site, from
// the cheapest honest signal ingest keeps — each ingested dataset's import
// report (<data>/datasets/<name>/report.json, services/ingest/importer):
//   licences.quarantined > 0   its source held documents under a licence the
//                              import's deny list names (quarantine kept them
//                              out of the shards; issue 16 asks an admin to
//                              confirm such a model anyway)
//   pii.enabled == false       imported with --no-pii: PII found in it was
//                              never redacted
// A lineage entry that is no ingest dataset (text:, sft:, shards:) has no
// report: "not assessed", never a silent pass. Pure functions; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom::modelcheck {

struct compliance_finding {
  std::vector<std::string> problems;       // each refuses the export (an admin may override)
  std::vector<std::string> not_assessed;   // lineage entries nothing could be said of
  std::vector<std::string> notes;          // what was looked at and found clean
};

// One dataset's import report (its JSON text); `name` names it in the lines.
// A report that does not parse is a problem (nothing can be shown).
void assess_import_report(std::string_view report_json, const std::string& name, compliance_finding& out);

// Every lineage entry ("dataset:NAME", "text:/path", ...): datasets' reports
// read from <datasets_root>/NAME/report.json (the version's tenant's datasets:
// layout::tenant_datasets_root); a missing report is a problem.
compliance_finding assess_lineage(const std::vector<std::string>& lineage, const std::string& datasets_root);

}  // namespace loom::modelcheck
