// Command-line parsing for `loom`: a command path ("token issue"), options
// (--name value, --flag) anywhere on the line, and positional arguments.
// Options take a value unless declared as flags; `--name=value` works too.
#pragma once

#include "libs/status/status.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace loom::cli {

struct args {
  std::vector<std::string> positional;          // after the command words
  std::map<std::string, std::string> options;   // without the leading "--"; the last value wins
  std::map<std::string, std::vector<std::string>> repeated;  // every value of each option, in order
  std::set<std::string> flags;

  bool flag(const std::string& name) const { return flags.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  std::vector<std::string> all(const std::string& name) const;  // e.g. every --set
};

// Flags that never take a value, for every command.
inline const std::set<std::string> known_flags = {"json",    "help",   "h",        "force",   "quiet",
                                                   "decode",  "follow", "offline",  "no-pii",  "no-dedup"};

// invalid_argument (exit 2) for an option missing its value.
result<args> parse(const std::vector<std::string>& argv);

}  // namespace loom::cli
