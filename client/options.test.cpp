// The command table itself: consistent rows, every line the tests, scripts
// and docs use still parses, and each kind of value is checked.
#include "client/args.hpp"
#include "client/options.hpp"

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <sstream>

using namespace loom::cli;

TEST_CASE("an option name is a flag in every command or in none") {
  // The parser splits a line before it knows the command: it relies on this.
  std::map<std::string, bool> is_flag;
  for (const auto& o : global_options()) is_flag[o.name] = o.kind == value_kind::flag;
  for (const auto& c : command_table())
    for (const auto& o : c.options) {
      auto [it, fresh] = is_flag.emplace(o.name, o.kind == value_kind::flag);
      CHECK_MESSAGE(it->second == (o.kind == value_kind::flag), c.path << " --" << o.name);
      CHECK_MESSAGE(find_option(c, o.name) == &o, c.path << " --" << o.name << " is declared twice");
    }
}

TEST_CASE("every command path is unique and no command word is also a group of subcommands") {
  std::set<std::string> paths, groups;
  for (const auto& c : command_table()) {
    CHECK_MESSAGE(paths.insert(c.path).second, c.path);
    if (auto sp = c.path.find(' '); sp != std::string::npos) groups.insert(c.path.substr(0, sp));
    CHECK(c.min_operands <= c.max_operands);
    CHECK_FALSE(c.help.empty());
  }
  for (const auto& g : groups) CHECK_MESSAGE(find_command(g) == nullptr, g);
}

TEST_CASE("every command line the tests, scripts and docs use still parses") {
  const char* lines[] = {
      "up", "up --trainers 3", "up --wait 60 --zone local", "down", "status --json", "status --timeout 0.3",
      "ping", "ping trainer --timeout 0.3", "ping trainer-2", "watch --data-dir /d",
      "token issue --role viewer --zones local --ttl 3600 --json",
      "token issue --role operator --zones local --principal alice --offline", "token revoke-all", "keys init",
      "keys rotate --json", "keys rotate --token T", "audit verify", "audit verify --from 5 --json",
      "audit verify --database postgresql://u@h/db --keys /k --anchors /a", "audit trail job-000001",
      "audit tail --lines 50 --follow", "tokenize notes.txt", "tokenize --encoding gpt2 --field body docs.jsonl",
      "tokenize --decode ids.txt --field body", "data pii notes.txt --json --region GB",
      "data train-tokenizer --vocab-size 2048 corpus --out tok.json --min-frequency 2 --json",
      "data import corpus --dataset notes --profile web --memory 512MiB --nodes a,b --deny GPL-3.0,CC-BY-NC-* "
      "--no-pii --no-dedup --field text",
      "data list", "data status notes", "data rejects licenses --limit 5",
      "data sync --from /a --to /b --dataset notes --from-token T --to-token U --json", "templates",
      "templates --templates /t",
      "job submit --template pipeline-tiny --set dataset=licenses --set pretrain.train.steps=1000 --json",
      "job submit --template t.toml --priority high --tenant acme --zone local --request-id r1 --templates /t",
      "job list --state running --token T", "job show job-000001 --json", "job logs job-000001",
      "job watch job-000001 --interval 2", "job cancel job-000001 --reason stop --request-id r2",
  };
  for (const char* line : lines) {
    std::vector<std::string> argv;
    std::istringstream in(line);
    for (std::string w; in >> w;) argv.push_back(w);
    auto a = parse(argv);
    CHECK_MESSAGE(a.ok(), line << ": " << (a.ok() ? "" : a.err().message));
  }
}

TEST_CASE("check_value converts each kind and refuses what it cannot hold") {
  const auto secs = opt::seconds("t", 10, "");
  CHECK(check_value(secs, "2.5")->duration == std::chrono::milliseconds(2500));
  CHECK(check_value(secs, "1e1")->duration == std::chrono::milliseconds(10000));
  CHECK_FALSE(check_value(secs, "10.001").ok());
  const auto n = opt::count("n", "N", 2, 5, "");
  CHECK(check_value(n, "5")->number == 5);
  CHECK_FALSE(check_value(n, "1").ok());
  CHECK_FALSE(check_value(n, "6").ok());
  const auto sz = opt::size("s", 1, 1ULL << 40, "");
  CHECK(check_value(sz, "2GiB")->number == 2ULL << 30);
  CHECK(check_value(sz, "64M")->number == 64ULL << 20);
  CHECK(check_value(sz, "1000")->number == 1000);
  CHECK(check_value(sz, "1GB")->number == 1000000000ULL);
  CHECK_FALSE(check_value(sz, "2TiB").ok());
  CHECK_FALSE(check_value(sz, "MiB").ok());
  const auto l = opt::list("l", "X", "");
  CHECK(check_value(l, "*").ok());
  CHECK_FALSE(check_value(l, ",,").ok());
  const auto ch = opt::choice("c", {"a", "b"}, "");
  CHECK(check_value(ch, "b").ok());
  CHECK_FALSE(check_value(ch, "B").ok());
  const auto e = check_value(n, "x");
  REQUIRE_FALSE(e.ok());
  CHECK(e.err().message == "--n takes a whole number from 2 to 5, not 'x'");
}

TEST_CASE("the help of a command comes from its row") {
  const auto* c = find_command("audit tail");
  REQUIRE(c != nullptr);
  CHECK(usage_line(*c) == "usage: loom audit tail [--lines N] [--follow]");
  const auto h = command_help(*c);
  CHECK(h.find("--lines N") != std::string::npos);
  CHECK(h.find("--timeout S") != std::string::npos);  // the global options too
  CHECK(overview().find("  watch ") == std::string::npos);  // internal: not listed
  CHECK(overview().find("  job watch ID") != std::string::npos);
}
