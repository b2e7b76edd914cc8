// Helpers for cross-process tests: run EdgeLoom binaries and capture their
// output, make throwaway data dirs, fetch a URL on loopback, and clean up a
// `loom up` even when a test fails (by pid, never by name).
#pragma once

#include "libs/files/temp_dir.hpp"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace loom::test {

struct run_result {
  int code = -1;        // exit code; 128+N when killed by signal N
  std::string out, err;
};

// Path of an EdgeLoom binary in the build tree (LOOM_TEST_BIN_DIR).
std::string bin(const std::string& name);

// Runs argv[0] (a path) with arguments; stdin is /dev/null. Bounded by `timeout`
// (the child is killed and code = 124 when it runs over).
run_result run(const std::vector<std::string>& argv, std::chrono::seconds timeout = std::chrono::seconds(60));

// `loom ARGS... --data-dir dir`.
run_result run_loom(const std::string& data_dir, std::vector<std::string> args,
                std::chrono::seconds timeout = std::chrono::seconds(60));

// A fresh directory under /tmp, removed with its contents on scope exit.
using files::temp_dir;

// Runs `loom down` for `data_dir` on destruction (and kills whatever of that
// data dir still runs: processes_of), so a failing test leaves nothing behind.
struct up_guard {
  std::string data_dir;
  ~up_guard();
};

// True while `pid` exists and is not a zombie.
bool alive(long pid);

// Live processes whose command line names `data_dir` after --data-dir (the
// watcher and the services of that deployment), read from /proc: for checks
// only — a test stops processes by the pids it knows, never by this.
std::vector<long> processes_of(const std::string& data_dir);

// A free TCP port on 127.0.0.1 (closed again: a later bind may race, which is
// fine for tests on a machine of their own).
int free_port();

// HTTP GET http://host:port/path on loopback; empty string on failure.
std::string http_get(const std::string& host_port, const std::string& path,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

// Polls `pred` every `every` until it holds or `limit` passes; its last answer.
template <class Pred>
bool eventually(Pred pred, std::chrono::seconds limit,
                std::chrono::milliseconds every = std::chrono::milliseconds(250)) {
  for (auto until = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < until;) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

}  // namespace loom::test
