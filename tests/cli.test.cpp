// Cross-process: the `loom` command line against a real `loom up`. A property
// test over every row of the command table (client/options.hpp): random
// unknown options, empty values, malformed numbers and bad choices always
// exit 2 naming the offending option, and never act on the deployment (same
// pids, no job, no dataset, same token epoch and admin token, no new audited
// change). Then what `loom` prints from outside (a principal, a job message)
// is escaped, and files that never end are refused with the limit named.
#include "client/options.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/scheduler.pb.h"
#include "tests/support/cluster.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace cli = loom::cli;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every audit row as (seq, action, request id), from `audit tail --json` (one event per line).
std::vector<json> audit_rows(const std::string& home) {
  auto r = run_loom(home, {"audit", "tail", "--lines", "10000", "--json"}, 60s);
  std::vector<json> rows;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (auto j = json::parse(line, nullptr, false); !j.is_discarded()) rows.push_back(j);
  return rows;
}

// What a bad line must leave alone.
struct snapshot {
  std::map<std::string, long> pids;
  long watcher = 0;
  std::size_t jobs = 0, datasets = 0;
  std::string epoch, admin_token;
  std::uint64_t last_seq = 0;
};

snapshot take(const std::string& home) {
  snapshot s;
  auto st = loom_json(home, {"status"});
  for (auto& svc : st.value("services", json::array()))
    s.pids[svc.value("name", "")] = svc.value("healthy", false) ? svc.value("pid", 0L) : 0;
  if (auto e = loom::layout::read_endpoints(home + "/endpoints.json")) s.watcher = static_cast<long>(e->watcher_pid);
  s.jobs = loom_json(home, {"job", "list"}).value("jobs", json::array()).size();
  s.datasets = loom_json(home, {"data", "list"}).value("datasets", json::array()).size();
  s.epoch = slurp(loom::layout::paths{home}.epoch());
  s.admin_token = slurp(loom::layout::paths{home}.admin_token());
  for (auto& row : audit_rows(home)) s.last_seq = std::max(s.last_seq, row.value("seq", std::uint64_t{0}));
  return s;
}

// A value the option accepts (the line is made bad elsewhere).
std::string good_value(const cli::option_spec& o, const std::string& scratch) {
  switch (o.kind) {
    case cli::value_kind::flag: return "";
    case cli::value_kind::text: return "x";
    case cli::value_kind::path: return scratch + "/p";
    case cli::value_kind::choice: return o.choices.front();
    case cli::value_kind::count: return std::to_string(o.min);
    case cli::value_kind::seconds: return "1";
    case cli::value_kind::size: return "1MiB";
    case cli::value_kind::list: return "a,b";
    case cli::value_kind::key_value: return "k=v";
  }
  return "x";
}

// Values the option must refuse.
std::vector<std::string> bad_values(const cli::option_spec& o) {
  switch (o.kind) {
    case cli::value_kind::count:
      return {"abc", "-1", "-5", "1e300", "nan", "0x10", "1.5", "99999999999999999999", "+3", " 5", "0", "7abc"};
    case cli::value_kind::seconds:
      return {"abc", "-1", "1e300", "nan", "inf", "-inf", "0", "-0", "0x10", "+3", "1s", " 5", "3601"};
    case cli::value_kind::size: return {"abc", "-1", "1e300", "12XB", "99999999999999999999MiB", "0x10", "0", "MiB"};
    case cli::value_kind::choice: return {"bogus", "GPT2", o.choices.front() + " "};
    case cli::value_kind::list: return {",", ",,,"};
    case cli::value_kind::key_value: return {"novalue", "=v", "k="};
    default: return {};
  }
}

struct bad_line {
  std::vector<std::string> argv;
  std::string offender;  // what the error must name
};

// One command line for row `c` with exactly one thing wrong in it.
bad_line make_bad_line(std::mt19937_64& rng, const cli::command_spec& c, const std::string& scratch) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  std::vector<std::vector<std::string>> groups;  // options stay whole when the bad one is inserted
  std::istringstream words(c.path);
  for (std::string w; words >> w;) groups.push_back({w});
  for (std::size_t i = 0; i < c.min_operands; ++i) groups.push_back({"job-000001"});
  std::vector<const cli::option_spec*> valued, numeric, all;
  for (const auto* list : {&c.options, &cli::global_options()})
    for (const auto& o : *list) {
      if (o.name == "help" || o.name == "h") continue;
      all.push_back(&o);
      if (o.kind != cli::value_kind::flag) valued.push_back(&o);
      if (!bad_values(o).empty()) numeric.push_back(&o);
    }
  for (const auto& o : c.options)  // required ones, and some optional ones, with good values
    if (o.required || rng() % 3 == 0) {
      if (o.kind == cli::value_kind::flag) groups.push_back({"--" + o.name});
      else groups.push_back({"--" + o.name, good_value(o, scratch)});
    }
  const auto command_words = static_cast<long>(std::count(c.path.begin(), c.path.end(), ' ') + 1);
  std::shuffle(groups.begin() + command_words, groups.end(), rng);

  bad_line b;
  std::vector<std::string> bad;
  bool at_end = false;
  switch (pick(6)) {
    case 0:
    case 1: {  // an unknown option, alone, with a value or with =value
      static const std::vector<std::string> typos = {"verbose", "force", "dry-run", "data_dir", "datadir", "jsn",
                                                      "time-out", "all", "yes", "quiet", "v", "n", "x"};
      std::string name;
      do {
        if (rng() % 2) {
          name = typos[pick(typos.size())];
        } else {
          name.clear();
          for (std::size_t i = 0, n = 2 + pick(8); i < n; ++i) name += static_cast<char>('a' + pick(26));
        }
      } while (cli::find_option(c, name) != nullptr);
      b.offender = (name.size() == 1 && rng() % 2 ? "-" : "--") + name;
      bad = {b.offender};
      if (rng() % 3 == 0) bad.push_back(rng() % 2 ? "B" : "--data-dir");
      else if (rng() % 3 == 0) bad = {b.offender + "=1"};
      break;
    }
    case 2: {  // an empty value
      const auto* o = valued[pick(valued.size())];
      b.offender = "--" + o->name;
      bad = rng() % 2 ? std::vector<std::string>{b.offender, ""} : std::vector<std::string>{b.offender + "="};
      break;
    }
    case 3: {  // a malformed number, a bad choice or a malformed list / pair
      const auto* o = numeric[pick(numeric.size())];
      const auto values = bad_values(*o);
      b.offender = "--" + o->name;
      bad = {b.offender, values[pick(values.size())]};
      break;
    }
    case 4: {  // a flag given a value
      std::vector<const cli::option_spec*> flags;
      for (const auto* o : all)
        if (o->kind == cli::value_kind::flag) flags.push_back(o);
      const auto* o = flags[pick(flags.size())];
      b.offender = "--" + o->name;
      bad = {b.offender + "=yes"};
      break;
    }
    default: {  // a value option at the end of the line (run_loom's --data-dir follows)
      const auto* o = valued[pick(valued.size())];
      b.offender = "--" + o->name;
      bad = {b.offender};
      at_end = true;
    }
  }
  std::size_t at = at_end ? groups.size() : pick(groups.size() + 1);
  // "--unknown --data-dir" before a command word would make the word --data-dir's
  // value and the line's first error another one; "--unknown B" before it makes
  // B the command ("unknown command 'B'"): keep such a pair after the words.
  if (bad.size() == 2 && (bad[1] == "--data-dir" || bad[1] == "B") && at < static_cast<std::size_t>(command_words))
    at = static_cast<std::size_t>(command_words);
  groups.insert(groups.begin() + static_cast<long>(at), bad);
  for (auto& g : groups) b.argv.insert(b.argv.end(), g.begin(), g.end());
  return b;
}

std::string shown(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += " '" + a + "'";
  return s;
}

}  // namespace

TEST_CASE("no bad command line of any command exits other than 2 or touches a running deployment") {
  cluster c;
  REQUIRE(c.up);
  temp_dir scratch("loom-cli-scratch");
  const std::string home = c.home.path();
  const snapshot before = take(home);
  REQUIRE(before.pids.size() == 6);
  for (auto& [name, pid] : before.pids) CHECK_MESSAGE(pid > 0, name);

  // The lines of issue #13, then random ones for every command.
  std::vector<bad_line> lines = {
      {{"down", "--verbose", "--data-dir", scratch.path() + "/B"}, "--verbose"},
      {{"down", "--data-dir", ""}, "--data-dir"},
      {{"status", "--timeout", "abc"}, "--timeout"},
      {{"status", "--timeout", "-1"}, "--timeout"},
      {{"status", "--timeout", "1e300"}, "--timeout"},
      {{"up", "--wait", "abc"}, "--wait"},
      {{"data", "rejects", "x", "--limit", "abc"}, "--limit"},
      {{"audit", "verify", "--from", "-5"}, "--from"},
      {{"job", "list", "--state", "bogus"}, "--state"},
      {{"token", "revoke-all", "--force"}, "--force"},
      {{"keys", "rotate", "--yes"}, "--yes"},
      {{"job", "submit", "--template", "pipeline-test", "--set", "text=/usr/share/common-licenses/GPL-3", "--prio",
        "high"},
       "--prio"},
      {{"job", "cancel", "job-000001", "--request-id", ""}, "--request-id"},
      {{"data", "import", "", "--dataset", "x"}, "an empty argument"},  // was: import the current directory
  };
  std::mt19937_64 rng(20240613);
  const auto& table = cli::command_table();
  for (std::size_t i = 0; i < 300; ++i) lines.push_back(make_bad_line(rng, table[i % table.size()], scratch.path()));

  // LOOM_HOME names the deployment, so a line that lost its --data-dir would still hit it.
  ::setenv("LOOM_HOME", home.c_str(), 1);
  int failures = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& l : lines) {
    auto r = run_loom(home, l.argv, 20s);
    const bool ok = r.code == 2 && r.err.find(l.offender) != std::string::npos;
    if (!ok && ++failures <= 10)
      FAIL_CHECK("loom" << shown(l.argv) << ": exit " << r.code << ", expected 2 naming " << l.offender
                        << "\nstdout: " << r.out << "\nstderr: " << r.err);
  }
  ::unsetenv("LOOM_HOME");
  MESSAGE(lines.size() << " bad lines in "
                       << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
  CHECK(failures == 0);

  const snapshot after = take(home);
  CHECK(after.pids == before.pids);  // every service still running, none restarted
  CHECK(after.watcher == before.watcher);
  CHECK(after.jobs == before.jobs);
  CHECK(after.jobs == 0);
  CHECK(after.datasets == before.datasets);
  CHECK(after.epoch == before.epoch);  // no token revoke-all
  CHECK(after.admin_token == before.admin_token);
  // Reads are not audited: any new row is the services' own, never a change a line asked for.
  for (auto& row : audit_rows(home))
    if (row.value("seq", std::uint64_t{0}) > before.last_seq) {
      const std::string action = row.value("action", "");
      INFO("new audit row: " << row.dump());
      for (const char* change : {"SubmitJob", "CancelJob", "IssueToken", "RotateKeys", "ImportDataset", "PullDataset"})
        CHECK(action.find(change) == std::string::npos);
    }
  CHECK(std::filesystem::is_empty(scratch.path()));  // no --out, --to or --from written
}

TEST_CASE("an empty LOOM_HOME is a usage error, not the default home") {
  temp_dir fake_home("loom-cli-home");
  const char* old_home = std::getenv("HOME");
  const std::string saved_home = old_home ? old_home : "";
  ::setenv("HOME", fake_home.path().c_str(), 1);  // where the default data dir would be
  ::setenv("LOOM_HOME", "", 1);
  auto up = run({bin("loom"), "up", "--wait", "5"}, 30s);
  auto status = run({bin("loom"), "status"}, 30s);
  ::unsetenv("LOOM_HOME");
  if (old_home) ::setenv("HOME", saved_home.c_str(), 1);
  CHECK(up.code == 2);
  CHECK(up.err.find("$LOOM_HOME is set but empty") != std::string::npos);
  CHECK(status.code == 2);
  CHECK(std::filesystem::is_empty(fake_home.path()));  // no deployment in the default home
}

TEST_CASE("a name with a newline and an escape sequence prints as one escaped audit row") {
  // Principals with control characters can no longer be minted (auth::validate_name);
  // a node id is still the caller's text, and a refused drain writes it into
  // the audit record's reason.
  cluster c;
  REQUIRE(c.up);
  const std::string evil = "mallory\n       1  2024-01-01T00:00:00Z  audit      admin/admin  IssueToken  allow\x1b[2J";
  auto cli = c.client("scheduler");
  REQUIRE(cli);
  v1::DrainNodeRequest drain;
  drain.mutable_node()->set_value(evil);
  auto refused = wire::call_typed<v1::DrainNodeReply>(*cli, drain, c.admin());
  REQUIRE(refused.code() == errc::not_found);
  auto tail = run_loom(c.home.path(), {"audit", "tail", "--lines", "50"});
  REQUIRE(tail.code == 0);
  INFO(tail.out);
  CHECK(tail.out.find('\x1b') == std::string::npos);
  CHECK(tail.out.find("mallory") != std::string::npos);
  const std::regex row(R"(^ *\d+  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  .*)");
  std::istringstream in(tail.out);
  int rows = 0;
  for (std::string line; std::getline(in, line); ++rows) CHECK_MESSAGE(std::regex_match(line, row), line);
  CHECK(rows > 0);
  // --json: one valid line per event, the reason on one line too.
  auto js = run_loom(c.home.path(), {"audit", "tail", "--lines", "50", "--json"});
  bool found = false;
  std::istringstream jin(js.out);
  for (std::string line; std::getline(jin, line);) {
    auto j = json::parse(line, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    const std::string reason = j.value("reason", "");
    if (reason.find("mallory") == std::string::npos) continue;
    found = true;
    CHECK(reason.find('\n') == std::string::npos);
    CHECK(reason.find('\x1b') == std::string::npos);
  }
  CHECK(found);
}

TEST_CASE("job show prints a multi-line message whole and job cancel sends its request id") {
  cluster c({"--import-root", "/usr/share/common-licenses"});
  REQUIRE(c.up);
  const std::string home = c.home.path();
  auto job = loom_json(home, {"job", "submit", "--template", "pipeline-test", "--set",
                              "text=/usr/share/common-licenses/GPL-3"});
  REQUIRE(job.contains("id"));
  const std::string id = job["id"];
  auto cancel = run_loom(home, {"job", "cancel", id, "--reason", "stopped by the operator:\nsecond line \x1b[2J end",
                                "--request-id", "cli-cancel-req-1"});
  INFO(cancel.err);
  REQUIRE(cancel.code == 0);
  auto show = run_loom(home, {"job", "show", id});
  REQUIRE(show.code == 0);
  INFO(show.out);
  CHECK(show.out.find("\n  stopped by the operator:\n  second line \\x1b[2J end\n") != std::string::npos);
  CHECK(show.out.find('\x1b') == std::string::npos);
  bool sent = false;
  for (auto& row : audit_rows(home))
    sent = sent || (row.value("action", "").find("CancelJob") != std::string::npos &&
                    row.value("request_id", "") == "cli-cancel-req-1");
  CHECK(sent);
}

TEST_CASE("files that never end are refused with the file and the limit named, by every command that reads one") {
  temp_dir dir("loom-cli-files");
  auto timed = [](std::vector<std::string> argv) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run(argv, 60s);
    CHECK_MESSAGE(std::chrono::steady_clock::now() - t0 < 30s, argv[1]);
    return r;
  };
  // Whole-file inputs: capped.
  auto pii = timed({bin("loom"), "data", "pii", "/dev/zero"});
  CHECK(pii.code == 1);
  CHECK(pii.err.find("/dev/zero is larger than 256 MiB") != std::string::npos);
  auto tok = timed({bin("loom"), "tokenize", "/dev/zero"});
  CHECK(tok.code == 1);
  CHECK(tok.err.find("/dev/zero is larger than 256 MiB") != std::string::npos);
  auto tpl = timed({bin("loom"), "job", "submit", "--template", "/dev/zero", "--data-dir", dir.path()});
  CHECK(tpl.code == 1);
  CHECK(tpl.err.find("/dev/zero is larger than 1 MiB") != std::string::npos);
  auto text = timed({bin("loom"), "job", "submit", "--template", "pipeline-test", "--set", "text=/dev/zero",
                     "--data-dir", dir.path()});
  CHECK(text.code == 1);
  CHECK(text.err.find("/dev/zero is not a regular file") != std::string::npos);
  // Streamed inputs: a device or pipe is refused (it may never end).
  auto train = timed({bin("loom"), "data", "train-tokenizer", "--vocab-size", "300", "/dev/zero", "--out",
                      dir.path() + "/tok.json"});
  CHECK(train.code == 1);
  CHECK(train.err.find("/dev/zero is not a regular file") != std::string::npos);
  // Token files.
  std::filesystem::create_directories(dir.path() + "/a");
  std::filesystem::create_symlink("/dev/zero", dir.path() + "/a/admin.token");
  auto sync = timed({bin("loom"), "data", "sync", "--from", dir.path() + "/a", "--to", dir.path() + "/b", "--dataset",
                     "x", "--data-dir", dir.path()});
  CHECK(sync.code == 1);
  CHECK(sync.err.find("admin.token is larger than 64 KiB") != std::string::npos);
  // Template listing: a template that never ends is listed without its description.
  std::filesystem::create_directories(dir.path() + "/t");
  std::filesystem::create_symlink("/dev/zero", dir.path() + "/t/zero.toml");
  auto list = timed({bin("loom"), "templates", "--templates", dir.path() + "/t", "--data-dir", dir.path()});
  CHECK(list.code == 0);
  CHECK(list.out.find("zero") != std::string::npos);
}
