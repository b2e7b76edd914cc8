// toml_reader: what run_config.cpp and job_template.cpp share inside
// libs/runspec — reading a run config out of an already parsed TOML table
// (so a template's values keep their template line numbers) and turning
// override text into a TOML value. Private to the library: it includes
// toml++, which the public headers keep out of everyone else's build.
#pragma once

#include "libs/runspec/run_config.hpp"
#include "libs/runspec/template_info.hpp"

#include <toml++/toml.h>

#include <map>
#include <memory>
#include <string>

namespace loom::runspec {

// The most trainers one stage may span (a sanity bound: a typo of 1000 is refused).
inline constexpr std::int64_t max_group = 64;

// "section.key" -> its line in a template: toml++ drops a node's source when
// it is copied, and a job template's stages are copies of its sections.
using key_lines = std::map<std::string, int, std::less<>>;

// The checks of parse_run_config on a table (overrides already applied);
// `lines`, when given, names the template line of a value that was copied.
// has_parent: a stage after the first, whose model.init_from the scheduler fills.
result<run_config> read_run_config(const toml::table& root, const std::string& origin,
                                   const key_lines* lines = nullptr, bool has_parent = false);

// A TOML value from `--set` text: 3, 1e-3, true, "x"; a bare word is a string.
std::unique_ptr<toml::node> override_value(const std::string& text);

// A template's [ingest] section, already parsed (template_info.hpp's rules).
result<ingest_settings> read_ingest_table(std::string_view template_name, const toml::node& section);

}  // namespace loom::runspec
