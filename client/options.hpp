// The options of every `loom` command, declared once: each command (or
// subcommand) is a row of command_table() with its positional arguments and a
// typed option list; global_options() apply to all. The parser (args.hpp)
// checks a command line against its row before the command runs, and the help
// text is printed from the same rows. Immutable tables; any thread.
#pragma once

#include "libs/status/status.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::cli {

enum class value_kind {
  flag,       // --name, no value
  text,       // any non-empty string
  path,       // a non-empty file or directory name
  choice,     // one of `choices`
  count,      // a whole number in [min, max]
  seconds,    // a finite number of seconds in (0, max_seconds]
  size,       // bytes: 512MiB, 2GiB, 64M, 1000 — in [min, max]
  list,       // comma-separated, at least one non-empty item
  key_value,  // KEY=VALUE, both non-empty
};

struct option_spec {
  std::string name;        // without "--"
  value_kind kind = value_kind::flag;
  std::string metavar;     // what the value is called in help: N, S, DIR
  std::string help;        // one line
  std::vector<std::string> choices;  // kind::choice
  std::uint64_t min = 0, max = 0;    // kind::count, kind::size
  double max_seconds = 0;            // kind::seconds
  bool required = false;
  bool repeated = false;   // every value is kept (args::all), not only the last
};

// Builders, so a table row reads as one line per option.
namespace opt {
option_spec flag(std::string name, std::string help);
option_spec text(std::string name, std::string metavar, std::string help);
option_spec path(std::string name, std::string metavar, std::string help);
option_spec choice(std::string name, std::vector<std::string> choices, std::string help);
option_spec count(std::string name, std::string metavar, std::uint64_t min, std::uint64_t max, std::string help);
option_spec seconds(std::string name, double max_seconds, std::string help);
option_spec size(std::string name, std::uint64_t min, std::uint64_t max, std::string help);
option_spec list(std::string name, std::string metavar, std::string help);
option_spec key_values(std::string name, std::string help);  // repeated KEY=VALUE
option_spec required(option_spec o);
option_spec repeated(option_spec o);  // every value kept, in order (args::all)
}  // namespace opt

struct command_spec {
  std::string path;      // the command words: "job submit"
  std::string operands;  // positional arguments in help: "ID", "[SERVICE]..."
  std::size_t min_operands = 0, max_operands = 0;
  std::vector<option_spec> options;  // besides the global ones
  std::string help;      // one line
  std::string details;   // more lines for `--help`; may be empty
  bool hidden = false;   // internal (`loom watch`): not in the overview
};

// Every command, in the order of the overview.
const std::vector<command_spec>& command_table();
// --data-dir, --json, --token, --timeout, --help (and -h).
const std::vector<option_spec>& global_options();

// The row for the command words `path`; nullptr when there is none.
const command_spec* find_command(std::string_view path);
// The spec of option `name` for `c` (its own or a global one); nullptr if unknown.
const option_spec* find_option(const command_spec& c, std::string_view name);

// A checked option value: what the command reads instead of parsing text.
struct typed_value {
  std::string text;              // as given (every kind)
  std::uint64_t number = 0;      // count, size
  std::chrono::milliseconds duration{0};  // seconds, rounded up to >= 1 ms
};
// invalid_argument naming --name, what it takes and the value given.
result<typed_value> check_value(const option_spec& o, const std::string& value);

// "usage: loom job submit --template T [--set KEY=VALUE]... [...]".
std::string usage_line(const command_spec& c);
// usage_line, the help line, details and one line per option.
std::string command_help(const command_spec& c);
// Every command that starts with `prefix` ("" = all), one line each.
std::string overview(std::string_view prefix = "");

}  // namespace loom::cli
