// loom: the EdgeLoom command-line client. Parses the line, then hands it to
// one command (client/*.cpp). Exit codes: 0 ok, 1 error, 2 usage,
// 3 permission denied, 4 unavailable.
#include "client/cli.hpp"

#include <cstdio>
#include <map>
#include <string>

namespace {
const char* help_text =
    "usage: loom COMMAND [options]   (every command takes --data-dir D and --json)\n"
    "  up [--wait S] [--zone Z] [--trainers N]  start the services (N trainers) on loopback, wait until healthy\n"
    "  down                           stop them\n"
    "  status                         services and the node roster\n"
    "  ping [SERVICE]                 ingest | scheduler | trainer | aggregator | audit\n"
    "  token issue --role R [--zones Z1,Z2|*] [--ttl SECONDS] [--principal P]   (admin key; audited through\n"
    "                                 the audit service, --offline issues locally without an audit record)\n"
    "  token revoke-all               revoke every token issued so far (bumps the epoch)\n"
    "  keys init                      create keys and the first admin token\n"
    "  keys rotate                    new audit key-encryption key version (old ones only decrypt)\n"
    "  audit verify [--from SEQ]      check the audit hash chain and its signed anchors (store read directly)\n"
    "  audit trail JOB | tail [--lines N] [--follow]   a job's audit timeline / the newest events\n"
    "  tokenize [--field F] PATH      GPT-2 ids, one line per document (.jsonl: per record); --decode PATH reverses\n"
    "  data pii FILE [--region CC]    PII and secret spans in FILE's bytes (offline; --json: type/start/end)\n"
    "  templates                      job templates (templates/, --templates DIR, $LOOM_TEMPLATES)\n"
    "  job submit --template T [--set k=v]... [--priority P]   queue a training job (pipeline of stages)\n"
    "  job list | show ID | logs ID | watch ID | cancel ID      inspect, follow and stop jobs\n"
    "data dir: --data-dir, else $LOOM_HOME, else ~/.local/share/edgeloom\n";
}

int main(int argc, char** argv) {
  using namespace loom::cli;
  auto parsed = parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed) return usage(parsed.err().message + "\n" + help_text);
  if (parsed->positional.empty() || parsed->flag("help") || parsed->flag("h"))
    return parsed->positional.empty() && !parsed->flag("help") ? usage(help_text) : (std::printf("%s", help_text), 0);
  static const std::map<std::string, int (*)(context&)> commands = {
      {"up", cmd_up},     {"down", cmd_down},   {"watch", cmd_watch}, {"status", cmd_status},
      {"ping", cmd_ping}, {"token", cmd_token}, {"keys", cmd_keys},
      {"tokenize", cmd_tokenize}, {"data", cmd_data}, {"job", cmd_job}, {"templates", cmd_templates},
      {"audit", cmd_audit}};
  auto it = commands.find(parsed->positional.front());
  if (it == commands.end()) return usage("loom: unknown command '" + parsed->positional.front() + "'\n" + help_text);
  context c(std::move(*parsed));
  return it->second(c);
}
