// `loom data SUBCOMMAND ...`: the data-engine commands (issue 5). Each
// subcommand lives in its own file (data_pii.cpp, ...); this only dispatches.
// Exit codes: those of the subcommand; 2 for a missing or unknown subcommand.
#include "client/cli.hpp"

#include <map>
#include <string>

namespace loom::cli {

int cmd_data_train_tokenizer(context& c);  // data_tokenizer.cpp
int cmd_data_train_filter(context& c);     // data_filter.cpp
int cmd_data_import(context& c);           // data_import.cpp
int cmd_data_list(context& c);
int cmd_data_status(context& c);
int cmd_data_rejects(context& c);
int cmd_data_verify(context& c);
int cmd_data_place(context& c);
int cmd_data_sync(context& c);             // data_sync.cpp

int cmd_data(context& c) {
  static const std::map<std::string, int (*)(context&)> subcommands = {
      {"pii", cmd_data_pii},
      {"train-tokenizer", cmd_data_train_tokenizer},
      {"train-filter", cmd_data_train_filter},
      {"import", cmd_data_import},
      {"list", cmd_data_list},
      {"status", cmd_data_status},
      {"rejects", cmd_data_rejects},
      {"verify", cmd_data_verify},
      {"place", cmd_data_place},
      {"sync", cmd_data_sync},
  };
  static const char* usage_line =
      "usage: loom data import PATH --dataset NAME [--profile P] [--memory 512MiB] [--nodes a,b] [--deny IDS]\n"
      "       loom data list | status NAME | verify NAME | rejects NAME [--limit N] [--offset N]\n"
      "       loom data place NAME --nodes a,b,c   (only the shards whose node changes move)\n"
      "       loom data sync --from A --to B --dataset D   (B pulls D from A; `loom data sync` alone: details)\n"
      "       loom data pii FILE [--json] [--region CC]\n"
      "       loom data train-tokenizer --vocab-size N PATH [--out tokenizer.json] [--min-frequency F] [--json]\n"
      "       loom data train-filter --kind text PATH [--good P --bad P] | --kind image (DIR | --generated N)\n"
      "                              [--out FILE] [--json]";
  if (c.a.positional.size() < 2) return usage("loom data: missing subcommand\n" + std::string(usage_line));
  auto it = subcommands.find(c.a.positional[1]);
  if (it == subcommands.end())
    return usage("loom data: unknown subcommand '" + c.a.positional[1] + "'\n" + std::string(usage_line));
  return it->second(c);
}

}  // namespace loom::cli
