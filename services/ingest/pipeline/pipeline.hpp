// The per-document pipeline: clean (UTF-8 repair, controls, whitespace, NFC) ->
// [after_clean hooks, e.g. PII redaction] -> quality rules -> licence/copyright
// scan and policy -> annotation validation -> [after_checks hooks, e.g. dedup]
// -> verdict: keep, reject(rule) or quarantine(reason). It counts everything
// into an import_report. PII and dedup live in their own libraries and plug in
// as hook stages; this library does not depend on them.
//
// A pipeline holds scratch buffers and its report: one per worker thread
// (merge the reports). Not thread-safe.
#pragma once

#include "services/ingest/pipeline/document.hpp"
#include "services/ingest/pipeline/filters/annotation.hpp"
#include "services/ingest/pipeline/filters/clean.hpp"
#include "services/ingest/pipeline/filters/licence.hpp"
#include "services/ingest/pipeline/filters/profile.hpp"
#include "services/ingest/pipeline/filters/quality.hpp"
#include "services/ingest/pipeline/readers/reader.hpp"
#include "services/ingest/pipeline/report.hpp"

#include <functional>
#include <string>
#include <vector>

namespace loom::ingest {

enum class outcome : std::uint8_t { keep, reject, quarantine };
std::string_view to_string(outcome o);

struct verdict {
  outcome kind = outcome::keep;
  std::string rule;    // reject: the rule ("gopher_min_words"); quarantine: the reason ("licence_denied")
  std::string detail;  // human-readable specifics ("12 words < 50", "GPL-3.0 (full_text)")

  static verdict keep() { return {}; }
  static verdict reject(std::string rule, std::string detail = {}) {
    return {outcome::reject, std::move(rule), std::move(detail)};
  }
  static verdict quarantine(std::string reason, std::string detail = {}) {
    return {outcome::quarantine, std::move(reason), std::move(detail)};
  }
};

// A pluggable stage. It may edit the document (redaction) and returns a verdict;
// an empty rule in a non-keep verdict is filled with the stage's name.
using stage_fn = std::function<verdict(document&)>;
enum class hook_point : std::uint8_t {
  after_clean,   // text is clean, nothing judged yet (PII redaction, language id)
  after_checks,  // the document passed every check (dedup: only kept text enters its index)
};

struct pipeline_options {
  profile prof;                          // cleaning options and quality thresholds
  licence_policy licences;               // report (default) or deny list
  annotation_rules annotations;
  bool quality_on_annotations = false;   // Gopher rules fit prose, not short chat turns
  std::size_t max_listed = 1000;         // problems listed in detail in the report
};

struct document_result {
  verdict v;
  clean_stats clean;
  licence_findings licences;
  std::vector<annotation_error> annotation_errors;
};

class pipeline {
 public:
  explicit pipeline(pipeline_options opt = {});

  void add_stage(hook_point at, std::string name, stage_fn fn);
  // Runs `d` through every stage; updates the report.
  document_result process(document& d);
  // A reader's rejection, into the report.
  void record(const rejection& r);
  // The reader's totals (files, bytes), into the report.
  void record(const read_stats& s);

  const import_report& report() const { return report_; }
  const pipeline_options& options() const { return opt_; }

 private:
  struct hook {
    hook_point at;
    std::string name;
    stage_fn fn;
  };
  bool run_hooks(hook_point at, document& d, document_result& r);
  document_result& finish(document& d, document_result& r);
  licence_findings scan_licences(const document& d);

  pipeline_options opt_;
  cleaner cleaner_;
  quality_checker quality_;
  licence_scanner licence_;
  std::vector<hook> hooks_;
  import_report report_;
};

// Sinks for run_import; any may be empty.
struct import_sinks {
  std::function<bool(document&, const document_result&)> kept;  // false stops the import
  std::function<void(document&, const document_result&)> quarantined;
  std::function<void(const document&, const document_result&)> rejected;
};

// Reads `path` and runs every document through `p`, reader rejections included.
read_stats run_import(const std::string& path, const reader_options& ropt, pipeline& p, const import_sinks& sinks = {});

}  // namespace loom::ingest
