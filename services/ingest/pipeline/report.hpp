// The import report: counters for one import (or one worker's share of it; see
// merge), the first problems in detail, and its JSON form for the service to
// store and the client to print. Plain value; one writer at a time.
#pragma once

#include "services/ingest/pipeline/filters/annotation.hpp"
#include "services/ingest/pipeline/filters/clean.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::ingest {

struct report_line {
  std::string stage;    // "reader", "rejected", "quarantined", "annotation"
  std::string file;
  std::uint64_t line = 0;
  std::string code;     // reject reason, rule name, or annotation error code
  std::string message;
};

struct import_report {
  std::uint64_t files = 0;
  std::uint64_t bytes_decoded = 0;
  std::uint64_t documents = 0;  // documents that entered the pipeline
  std::uint64_t kept = 0, rejected = 0, quarantined = 0;
  std::uint64_t bytes_kept = 0;

  std::map<std::string, std::uint64_t> reader_rejections;     // reason -> count
  std::map<std::string, std::uint64_t> rejected_by_rule;      // rule -> documents
  std::map<std::string, std::uint64_t> quarantined_by_reason; // reason -> documents
  std::map<std::string, std::uint64_t> lines_removed_by_rule; // C4 line filters -> lines
  std::map<std::string, std::uint64_t> licences;              // SPDX id -> documents
  std::uint64_t documents_with_copyright = 0;
  clean_stats cleaning;
  annotation_stats annotations;

  std::vector<report_line> problems;  // the first max_listed, in order
  std::uint64_t problems_not_listed = 0;
  std::size_t max_listed = 1000;

  void add_problem(report_line l);
  // Adds another report's counters (and problems, up to max_listed).
  void merge(const import_report& o);
  std::string to_json(int indent = 2) const;
};

}  // namespace loom::ingest
