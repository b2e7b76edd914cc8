// Command-line parsing for `loom`: the command words ("token issue"), its
// operands, and options anywhere on the line (--name value, --name=value,
// --flag; `--` ends the options). The line is checked against the command's
// row of command_table() (options.hpp) before anything runs: an unknown
// option, a missing or empty value, a malformed number, a missing required
// option or a wrong operand count is a usage error (exit 2) naming it.
// Commands read the checked, typed values from `args`.
#pragma once

#include "client/options.hpp"
#include "libs/status/status.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace loom::cli {

struct args {
  const command_spec* command = nullptr;  // the row the line matched; null only with `help`
  bool help = false;                      // --help / -h: print help, run nothing
  std::vector<std::string> positional;    // the command words, then the operands
  std::map<std::string, std::string> options;  // text of each option given (without "--"); the last value wins
  std::map<std::string, std::vector<std::string>> repeated;  // every value of each option, in order
  std::set<std::string> flags;
  std::map<std::string, typed_value> values;  // the checked value of each option (the last one)

  bool flag(const std::string& name) const { return flags.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  std::vector<std::string> all(const std::string& name) const;  // e.g. every --set
  // kind::count and kind::size options.
  std::optional<std::uint64_t> number(const std::string& name) const;
  // kind::seconds options.
  std::optional<std::chrono::milliseconds> duration(const std::string& name) const;
  // kind::list options: the non-empty items between commas; empty when absent.
  std::vector<std::string> items(const std::string& name) const;
};

// The checked line, or invalid_argument with the whole message to print
// (what is wrong, then the command's usage line). With --help/-h the command
// may be partial (`loom job --help`: command null, positional {"job"}).
result<args> parse(const std::vector<std::string>& argv);

// What the environment adds to a parsed line: $LOOM_HOME set but empty (and
// no --data-dir) is invalid_argument, not the default data dir.
status check_environment(const args& a);

// The text `loom [WORDS] --help` prints for a parsed help request.
std::string help_text(const args& a);

}  // namespace loom::cli
