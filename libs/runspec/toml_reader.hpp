// toml_reader: what run_config.cpp, overrides.cpp, stage_kinds.cpp and job_template.cpp share inside
// libs/runspec — reading a run config out of an already parsed TOML table
// (so a template's values keep their template line numbers) and turning
// override text into a TOML value. Private to the library: it includes
// toml++, which the public headers keep out of everyone else's build.
#pragma once

#include "libs/runspec/run_config.hpp"
#include "libs/runspec/template_info.hpp"

#include <toml++/toml.h>

#include <functional>
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

// Where a value came from: its line in the parsed text, else its line in the
// template it was copied from (`lines`, by "section.key"), else an override.
std::string where(const std::string& origin, const toml::node& n, const std::string& dotted = "",
                  const key_lines* lines = nullptr);
// invalid_argument "AT: KEY WHY".
error bad(const std::string& at, const std::string& key, const std::string& why);
// invalid_argument "ORIGIN: WHY", for checks that span several keys.
using config_error = std::function<error(const std::string& why)>;

// The kind-specific checks (stage_kinds.cpp), after the common sections are read:
// [diloco] against the rest (fixes the stage's group to one trainer per site),
// and [align]/[reward] of an rm, dpo or rl stage.
status check_diloco(const toml::table& root, run_config& c, const std::string& origin, const key_lines* lines);
status check_align(run_config& c, const std::string& kind, bool has_parent, const config_error& bad_cfg);

// A TOML value from `--set` text: 3, 1e-3, true, "x"; a bare word is a string.
// invalid_argument (the message says why, without the key: callers name it)
// for text that is not exactly one value: a control character (a line break
// would smuggle in a second key: "5\nrogue=1"), or text that opens a quoted
// string, an array or a table and does not parse as exactly that.
result<std::unique_ptr<toml::node>> override_value(const std::string& text);

// `text` quoted for a message, control characters escaped ("a\nb", "\x01")
// and anything past `max` characters elided (with the length said).
std::string quoted_text(std::string_view text, std::size_t max = 80);

// A template's [ingest] section, already parsed (template_info.hpp's rules).
result<ingest_settings> read_ingest_table(std::string_view template_name, const toml::node& section);

}  // namespace loom::runspec
