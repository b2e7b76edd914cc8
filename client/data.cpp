// `loom data SUBCOMMAND ...`: the data-engine commands (issue 5). Each
// subcommand lives in its own file (data_pii.cpp, ...); this only dispatches.
// Exit codes: those of the subcommand; 2 for a missing or unknown subcommand.
#include "client/cli.hpp"

#include <map>
#include <string>

namespace loom::cli {

int cmd_data(context& c) {
  static const std::map<std::string, int (*)(context&)> subcommands = {
      {"pii", cmd_data_pii},
  };
  static const char* usage_line = "usage: loom data pii FILE [--json] [--region CC]";
  if (c.a.positional.size() < 2) return usage("loom data: missing subcommand\n" + std::string(usage_line));
  auto it = subcommands.find(c.a.positional[1]);
  if (it == subcommands.end())
    return usage("loom data: unknown subcommand '" + c.a.positional[1] + "'\n" + std::string(usage_line));
  return it->second(c);
}

}  // namespace loom::cli
