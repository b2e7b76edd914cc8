// The `loom` parser: every line is checked against the command's row before
// anything runs (unknown options, empty values, malformed numbers, missing
// operands), and commands get typed values.
#include "client/args.hpp"

#include <doctest/doctest.h>

#include <cstdlib>

using loom::cli::parse;

namespace {

// The message of a line that must be refused (exit 2); FAILs when it parses.
std::string refused(const std::vector<std::string>& argv) {
  auto a = parse(argv);
  if (a.ok()) {
    FAIL_CHECK("parsed, but should be refused");
    return "";
  }
  CHECK(a.code() == loom::errc::invalid_argument);
  return a.err().message;
}

bool names(const std::string& message, const std::string& what) { return message.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("options may come before or after positional arguments") {
  auto a = parse({"--data-dir", "/d", "ping", "audit", "--json", "--timeout=3"});
  REQUIRE(a.ok());
  CHECK(a->positional == std::vector<std::string>{"ping", "audit"});
  CHECK(a->command->path == "ping");
  CHECK(a->get_or("data-dir", "") == "/d");
  CHECK(a->get_or("timeout", "") == "3");
  CHECK(a->duration("timeout") == std::chrono::milliseconds(3000));
  CHECK(a->flag("json"));
  auto b = parse({"ping", "--json", "audit", "--data-dir", "/d"});
  REQUIRE(b.ok());
  CHECK(b->positional == a->positional);
  CHECK(b->get_or("data-dir", "") == "/d");
}

TEST_CASE("an option without its value is a usage error") {
  CHECK(names(refused({"token", "issue", "--role"}), "--role needs a value"));
  // The next option is not taken for the value.
  CHECK(names(refused({"down", "--data-dir", "--json"}), "--data-dir needs a value"));
}

TEST_CASE("a double dash ends the options") {
  auto a = parse({"tokenize", "--", "--weird-file"});
  REQUIRE(a.ok());
  CHECK(a->positional == std::vector<std::string>{"tokenize", "--weird-file"});
}

TEST_CASE("an unknown option is refused and does not swallow the next argument") {
  // Was: --verbose took "--data-dir" as its value and B became an ignored word.
  const auto m = refused({"down", "--verbose", "--data-dir", "B"});
  CHECK(names(m, "loom down: unknown option --verbose"));
  CHECK(names(m, "usage: loom down"));
  CHECK(names(refused({"down", "--verbose=1"}), "unknown option --verbose"));
  CHECK(names(refused({"status", "-v"}), "unknown option -v"));
  // Known to another command, not to this one.
  CHECK(names(refused({"down", "--dataset", "x"}), "loom down: unknown option --dataset"));
  // Named first, even when its would-be value makes the command words wrong.
  CHECK(names(refused({"--frobnicate", "x", "job", "list"}), "unknown option --frobnicate"));
}

TEST_CASE("an empty value is refused for every kind of option") {
  CHECK(names(refused({"down", "--data-dir", ""}), "--data-dir needs a non-empty value"));
  CHECK(names(refused({"down", "--data-dir="}), "--data-dir needs a non-empty value"));
  CHECK(names(refused({"job", "list", "--token", ""}), "--token needs a non-empty value"));
  CHECK(names(refused({"job", "list", "--state", ""}), "--state"));
  CHECK(names(refused({"up", "--wait", ""}), "--wait"));
  CHECK(names(refused({"job", "submit", "--template", ""}), "--template"));
}

TEST_CASE("malformed and out-of-range numbers are refused with the option named") {
  for (const char* v : {"abc", "-1", "1e300", "nan", "inf", "0", "-0", "0x10", "+3", " 5", "5s"})
    CHECK_MESSAGE(names(refused({"status", "--timeout", v}), "--timeout takes seconds"), v);
  CHECK(names(refused({"up", "--wait", "abc"}), "--wait takes seconds"));
  CHECK(names(refused({"job", "watch", "j", "--interval", "-2"}), "--interval takes seconds"));
  for (const char* v : {"abc", "-5", "0", "1.5", "10001", "99999999999999999999", "1e3"})
    CHECK_MESSAGE(names(refused({"audit", "tail", "--lines", v}), "--lines takes a whole number from 1 to 10000"), v);
  CHECK(names(refused({"data", "rejects", "d", "--limit", "abc"}), "--limit takes a whole number"));
  CHECK(names(refused({"audit", "verify", "--from", "-5"}), "--from takes a whole number"));
  CHECK(names(refused({"up", "--trainers", "65"}), "--trainers takes a whole number from 1 to 64"));
  CHECK(names(refused({"token", "issue", "--role", "viewer", "--ttl", "-1"}), "--ttl"));
  CHECK(names(refused({"data", "import", "p", "--dataset", "d", "--memory", "lots"}), "--memory takes a size"));
  CHECK(names(refused({"data", "import", "p", "--dataset", "d", "--memory", "99999999999999999999MiB"}), "--memory"));
  CHECK(names(refused({"data", "import", "p", "--dataset", "d", "--memory", "17179869184TiB"}), "--memory"));
}

TEST_CASE("a value outside an option's choices is refused") {
  CHECK(names(refused({"job", "list", "--state", "bogus"}), "--state takes one of pending|queued|running"));
  CHECK(names(refused({"job", "submit", "--template", "t", "--priority", "urgent"}), "--priority"));
  CHECK(names(refused({"tokenize", "--encoding", "cl100k_base", "f"}), "--encoding takes one of gpt2"));
  CHECK(names(refused({"token", "issue", "--role", "root"}), "--role takes one of viewer|operator|admin"));
}

TEST_CASE("typed values reach the command already converted") {
  auto a = parse({"data", "import", "p", "--dataset", "d", "--memory", "512MiB", "--nodes", "a,,b", "--timeout",
                  "0.0001"});
  REQUIRE(a.ok());
  CHECK(a->number("memory") == 512ULL << 20);
  CHECK(a->items("nodes") == std::vector<std::string>{"a", "b"});
  CHECK(a->duration("timeout") == std::chrono::milliseconds(1));  // rounded up, never 0
  CHECK_FALSE(a->number("limit").has_value());
  auto t = parse({"audit", "tail", "--lines=50", "--follow"});
  REQUIRE(t.ok());
  CHECK(t->number("lines") == 50);
  CHECK(t->flag("follow"));
}

TEST_CASE("a flag given a value is refused") {
  CHECK(names(refused({"status", "--json=yes"}), "--json takes no value"));
}

TEST_CASE("repeated KEY=VALUE options keep every value and refuse malformed pairs") {
  auto a = parse({"job", "submit", "--template", "t", "--set", "a=1", "--set=b.c=x=y"});
  REQUIRE(a.ok());
  CHECK(a->all("set") == std::vector<std::string>{"a=1", "b.c=x=y"});
  for (const char* v : {"a", "=1", "a="})
    CHECK_MESSAGE(names(refused({"job", "submit", "--template", "t", "--set", v}), "--set takes KEY=VALUE"), v);
}

TEST_CASE("required options and operand counts are checked before the command runs") {
  CHECK(names(refused({"job", "submit"}), "--template is required"));
  CHECK(names(refused({"data", "sync", "--from", "a", "--to", "b"}), "--dataset is required"));
  CHECK(names(refused({"job", "show"}), "missing ID"));
  CHECK(names(refused({"down", "extra"}), "unexpected argument 'extra'"));
  CHECK(names(refused({"data", "pii", "a", "b"}), "unexpected argument 'b'"));
  // An empty operand is refused too: `data import ""` was the current directory.
  CHECK(names(refused({"data", "import", "", "--dataset", "d"}), "an empty argument where PATH goes"));
  CHECK(names(refused({"job", "show", ""}), "an empty argument"));
  auto p = parse({"ping", "ingest", "audit", "scheduler"});
  CHECK(p.ok());
}

TEST_CASE("unknown commands and subcommands are usage errors listing what exists") {
  CHECK(names(refused({}), "missing command"));
  CHECK(names(refused({"frobnicate"}), "unknown command 'frobnicate'"));
  const auto m = refused({"job", "frob"});
  CHECK(names(m, "unknown subcommand 'frob'"));
  CHECK(names(m, "job submit"));
  CHECK(names(refused({"job"}), "missing subcommand"));
}

TEST_CASE("help is a request, not an error, even without required options") {
  auto a = parse({"job", "submit", "--help"});
  REQUIRE(a.ok());
  CHECK(a->help);
  const auto text = loom::cli::help_text(*a);
  CHECK(names(text, "usage: loom job submit --template T"));
  CHECK(names(text, "--request-id ID"));
  CHECK(names(text, "(required)"));
  auto top = parse({"-h"});
  REQUIRE(top.ok());
  CHECK(names(loom::cli::help_text(*top), "job cancel ID"));
  auto job = parse({"job", "--help"});
  REQUIRE(job.ok());
  CHECK(names(loom::cli::help_text(*job), "job watch ID"));
  CHECK_FALSE(names(loom::cli::help_text(*job), "data import"));
}

TEST_CASE("job cancel takes a request id") {
  auto a = parse({"job", "cancel", "job-000001", "--request-id", "r-1", "--reason", "done"});
  REQUIRE(a.ok());
  CHECK(a->get_or("request-id", "") == "r-1");
}

TEST_CASE("what the command line said is escaped in the error") {
  const auto m = refused({"job", "list", "--state", "x\n\x1b[2J"});
  CHECK(names(m, "'x\\n\\x1b[2J'"));
  CHECK(m.find('\x1b') == std::string::npos);
  CHECK(names(refused({"frob\x1b"}), "'frob\\x1b'"));
}

TEST_CASE("an empty LOOM_HOME is an error unless --data-dir is given") {
  const char* old = std::getenv("LOOM_HOME");
  const std::string saved = old ? old : "";
  ::setenv("LOOM_HOME", "", 1);
  auto a = parse({"status"});
  REQUIRE(a.ok());
  auto st = loom::cli::check_environment(*a);
  CHECK_FALSE(st.ok());
  if (!st.ok()) CHECK(names(st.err().message, "$LOOM_HOME is set but empty"));
  auto b = parse({"status", "--data-dir", "/d"});
  REQUIRE(b.ok());
  CHECK(loom::cli::check_environment(*b).ok());
  ::setenv("LOOM_HOME", "/somewhere", 1);
  CHECK(loom::cli::check_environment(*a).ok());
  if (old) ::setenv("LOOM_HOME", saved.c_str(), 1);
  else ::unsetenv("LOOM_HOME");
}
