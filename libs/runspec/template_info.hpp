// template_info: what a job template says besides its stages — its header
// comment (when to use it; `loom templates` shows the first line, `loom
// templates show T` all of it) and an optional [ingest] section, the import
// options an industry template recommends for its data (`loom data import
// --template T`). The job ignores [ingest]; resolve_template validates it with
// read_ingest_section, so a typo is refused at submit as well as at import.
// Pure: no files, no clock. Plain values.
//
//   [ingest]
//   profile        = "default" | "web" | "code" | "minimal"   cleaning + quality rules
//   deny_licences  = ["GPL-3.0", "CC-BY-NC-*"]   licences quarantined (empty: report only)
//   pii            = true      redact PII to typed placeholders (false: keep it)
//   dedup          = true      drop exact and near duplicates
//   text_field     = "text"    JSONL records: the string field holding the text
//   formats        = ["text", "markdown", "jsonl"]   files the import accepts:
//                  text markdown html jsonl csv tsv (the client refuses others)
#pragma once

#include "libs/status/status.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::runspec {

// The leading comment lines of a template ("# " stripped), up to the first
// line that is not a comment; empty when the text does not start with one.
std::vector<std::string> template_header(std::string_view toml);
// The first header line (a one-line summary), "" when there is none.
std::string template_summary(std::string_view toml);

struct ingest_settings {
  bool present = false;  // the template has an [ingest] section
  std::string profile;   // "" = the service's default
  std::vector<std::string> deny_licences;
  std::optional<bool> pii, dedup;  // unset = the service's default (on)
  std::string text_field;
  std::vector<std::string> formats;  // empty = every format the readers know
};

// The reader formats a template may name in ingest.formats.
const std::vector<std::string>& ingest_format_names();
// The format of a file name as the ingest readers decide it (by extension,
// after .gz/.zst; no extension = text); "" for a name they would reject.
std::string ingest_format_of(std::string_view file_name);

// The [ingest] section of a template (present = false when there is none).
// invalid_argument naming `<template>.toml:LINE` and the key: an unknown key, a
// wrong type, an unknown profile or format, an empty licence id.
result<ingest_settings> read_ingest_section(std::string_view template_name, std::string_view toml);

}  // namespace loom::runspec
