// loom: the EdgeLoom command-line client. Parses and checks the line against
// the command table (options.hpp), then hands it to one command (client/*.cpp).
// Exit codes: 0 ok, 1 error, 2 usage, 3 permission denied, 4 unavailable.
#include "client/cli.hpp"
#include "client/lifecycle.hpp"

#include <cstdio>
#include <map>
#include <string>

int main(int argc, char** argv) {
  using namespace loom::cli;
  auto parsed = parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed) return usage(parsed.err().message);
  if (parsed->help) return std::fputs(help_text(*parsed).c_str(), stdout) < 0 ? error_exit : ok_exit;
  if (auto st = check_environment(*parsed); !st) return usage(st.err().message);
  static const std::map<std::string, int (*)(context&)> commands = {
      {"up", cmd_up},     {"down", cmd_down},   {"watch", cmd_watch}, {"status", cmd_status},
      {"ping", cmd_ping}, {"token", cmd_token}, {"keys", cmd_keys},
      {"tokenize", cmd_tokenize}, {"data", cmd_data}, {"job", cmd_job}, {"templates", cmd_templates},
      {"audit", cmd_audit}, {"site", cmd_site}, {"model", cmd_model}, {"node", cmd_node},
      {"diagnose", cmd_diagnose}, {"init", cmd_init},
      {"report", cmd_report}, {"suggest", cmd_suggest}};
  auto it = commands.find(parsed->positional.front());
  if (it == commands.end()) return usage("loom: no handler for '" + parsed->positional.front() + "'");
  context c(std::move(*parsed));
  use_saved_database(c.paths);  // `loom init --database URL`'s store, unless LOOM_DATABASE_URL names one
  return it->second(c);
}
