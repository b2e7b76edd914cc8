// Cross-process store tests, compiled once per engine (store_process_sqlite_tests,
// store_process_postgres_tests; CTest names end in [sqlite] / [postgres]).
// They start tests/store_writer, kill it with SIGKILL or race two of them, and
// check the database afterwards. Deterministic plans (fixed seeds), bounded waits.
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "tests/store/test_schema.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <random>
#include <spawn.h>
#include <string>
#include <thread>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace store = loom::store;

extern char** environ;

namespace {

constexpr store::backend engine = store::testing::suite_backend;

template <class R>
std::string why(const R& r) {
  return r.ok() ? std::string() : r.err().to_string();
}

// A store_writer child with pipes on stdin and stdout; SIGKILLed and reaped
// on destruction if still running, so a failing test leaves no process behind.
class writer {
 public:
  explicit writer(const std::vector<std::string>& args) {
    int in[2], out[2];
    REQUIRE(::pipe(in) == 0);
    REQUIRE(::pipe(out) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    for (int fd : {in[0], in[1], out[0], out[1]}) posix_spawn_file_actions_addclose(&fa, fd);
    std::vector<std::string> argv_s{LOOM_STORE_WRITER};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    REQUIRE_MESSAGE(rc == 0, "posix_spawn " << argv_s[0] << " failed");
  }
  ~writer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(to_);
    ::close(from_);
  }
  writer(const writer&) = delete;
  writer& operator=(const writer&) = delete;

  // The next line of output; "" on EOF or after `timeout`.
  std::string read_line(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "";
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[256];
      auto n = ::read(from_, chunk, sizeof chunk);
      if (n <= 0) return "";
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  // Reads lines until one equals `line`; false on EOF/timeout.
  bool wait_for(const std::string& line) {
    for (std::string got; !(got = read_line()).empty();) {
      if (got == line) return true;
    }
    return false;
  }
  void write_line(const std::string& line) {
    std::string l = line + "\n";
    REQUIRE(::write(to_, l.data(), l.size()) == static_cast<ssize_t>(l.size()));
  }
  void kill9() {
    ::kill(pid_, SIGKILL);
    CHECK(exit_status() == 128 + SIGKILL);
  }
  // 0..255 exit code, or 128 + signal.
  int exit_status() {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buf_;
};

struct crash_state {
  std::int64_t counter, rows, distinct_txns, max_txn;
};

crash_state inspect(const std::string& url) {
  auto db = store::database::open(url);  // reopen after every kill: recovery must work
  REQUIRE_MESSAGE(db.ok(), why(db));
  auto s = (*db)->with_transaction([](store::transaction& tx) -> loom::result<crash_state> {
    auto c = tx.query("SELECT n FROM crash_counter WHERE id = 1");
    auto r = tx.query("SELECT COUNT(*), COUNT(DISTINCT txn), COALESCE(MAX(txn), 0) FROM crash_rows");
    if (!c.ok()) return c.err();
    if (!r.ok()) return r.err();
    const auto& row = (*r)[0];
    return crash_state{(*c)[0].get_i64(0).value(), row.get_i64(0).value(), row.get_i64(1).value(),
                       row.get_i64(2).value()};
  });
  REQUIRE_MESSAGE(s.ok(), why(s));
  return *s;
}

}  // namespace

TEST_CASE("a writer killed with SIGKILL at 50 seeded points mid-transaction never leaves a partial transaction") {
  auto scratch = store::testing::scratch::make(engine, "crash");
  REQUIRE_MESSAGE(scratch.ok(), why(scratch));
  const std::string url = scratch->url();
  constexpr int k = 20;  // rows per transaction
  std::mt19937 rng(20240503);
  int paused_kills = 0, timed_kills = 0;
  std::int64_t counter = 0;
  for (int round = 0; round < 50; ++round) {
    CAPTURE(round);
    const bool pause = rng() % 2 == 0;                 // kill while certainly inside a transaction ...
    const std::int64_t target = counter + 1 + rng() % 4;  // ... in this transaction
    const auto delay = std::chrono::microseconds(rng() % 3000);  // timed: anywhere after its middle
    writer w({"crash", url, std::to_string(k), std::to_string(pause ? target : 0)});
    const std::string mark = (pause ? "paused " : "mid ") + std::to_string(target);
    REQUIRE_MESSAGE(w.wait_for(mark), "writer never printed '" << mark << "'");
    if (!pause) std::this_thread::sleep_for(delay);
    w.kill9();
    (pause ? paused_kills : timed_kills)++;

    auto s = inspect(url);
    CHECK(s.rows == k * s.counter);  // the invariant: whole transactions only
    CHECK(s.distinct_txns == s.counter);
    CHECK(s.max_txn == s.counter);
    if (pause) {
      CHECK(s.counter == target - 1);  // everything before the paused transaction, nothing of it
    } else {
      CHECK(s.counter >= target - 1);
    }
    CHECK(s.counter >= counter);  // committed work survives the kill
    counter = s.counter;
  }
  MESSAGE("paused kills " << paused_kills << ", timed kills " << timed_kills << ", transactions " << counter);
  CHECK(paused_kills > 10);
  CHECK(timed_kills > 10);
}

TEST_CASE("two processes racing 1000 transitions each on the same rows lose no update") {
  auto scratch = store::testing::scratch::make(engine, "race");
  REQUIRE_MESSAGE(scratch.ok(), why(scratch));
  const std::string url = scratch->url();
  {  // migrate first so both writers start from the same schema
    auto db = store::database::open(url);
    REQUIRE_MESSAGE(db.ok(), why(db));
    auto m = store::migrate(**db, loom::store_test::test_migrations());
    REQUIRE_MESSAGE(m.ok(), why(m));
  }
  constexpr int per_writer = 1000;
  writer a({"race", url, std::to_string(per_writer), "11"});
  writer b({"race", url, std::to_string(per_writer), "22"});
  REQUIRE(a.wait_for("ready"));
  REQUIRE(b.wait_for("ready"));
  a.write_line("go");
  b.write_line("go");
  int conflicts = 0;
  for (writer* w : {&a, &b}) {
    std::string done = w->read_line(std::chrono::seconds(90));
    REQUIRE_MESSAGE(done.rfind("done ", 0) == 0, "writer said '" << done << "'");
    int s = 0, c = 0;
    REQUIRE(std::sscanf(done.c_str(), "done %d %d", &s, &c) == 2);
    CHECK(s == per_writer);
    conflicts += c;
    CHECK(w->exit_status() == 0);
  }
  MESSAGE("conflicts seen and retried: " << conflicts);
  // Without conflicts the writers never overlapped and the race proved nothing
  // (store_writer's think time between read and write makes them overlap).
  CHECK(conflicts > 0);

  auto db = store::database::open(url);
  REQUIRE(db.ok());
  auto rows = (*db)->with_transaction([](store::transaction& tx) {
    return tx.query("SELECT id, value, row_version FROM race_rows ORDER BY id");
  });
  REQUIRE_MESSAGE(rows.ok(), why(rows));
  REQUIRE(rows->size() == loom::store_test::race_row_count);
  std::int64_t total = 0;
  for (const auto& r : *rows) {
    CAPTURE(r.get_i64(0).value());
    CHECK(r.get_i64("value").value() == r.get_i64("row_version").value());  // no lost update
    total += r.get_i64("row_version").value();
  }
  CHECK(total == 2 * per_writer);  // every successful transition is in the final versions
}
