// Process helpers for the local launcher: spawning detached children with
// their output in a log file, telling whether a pid is still exactly one
// process of one data dir (by its command line), and stopping those.
// Stateless functions; called from the launcher's and the watcher's main thread.
#pragma once

#include "libs/layout/layout.hpp"

#include <string>
#include <sys/types.h>
#include <vector>

namespace loom::cli {

// Directory holding the `loom` binary (the services sit beside it), unless
// $LOOM_BIN_DIR says otherwise.
std::string bin_dir();

// fork + exec `argv` with stdin from /dev/null, stdout/stderr appended to
// `log` (created 0600), and every other descriptor closed (so a parent's
// pipes, e.g. a test runner's, are not held open) except `pass_fd`, which the
// child gets as its fd 3 (the data dir lock `loom up` hands to the watcher).
// `new_session` detaches it (setsid). Returns the child's pid, or -1.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log, bool new_session, int pass_fd = -1);

// The data dir as processes are told it: absolute, without . or .. or links.
std::string canonical_dir(const std::string& dir);

// True while `pid` runs (not a zombie) and its command line says it is process
// `name` of the deployment in `root`: "watcher" is `loom watch --data-dir
// ROOT`; a service is its binary (loom-trainer serve) with --data-dir ROOT,
// and an extra instance (trainer-2) also --node-id trainer-2@HOST. Never by
// executable name alone: a pid reused by anything else is not ours.
bool is_process_of(pid_t pid, const std::string& root, const std::string& name);

// Stops process `name` of `root` at `pid` (SIGTERM, then SIGKILL after
// `term_ms`), only while is_process_of holds. Returns true when it is gone.
bool stop_process_of(pid_t pid, const std::string& root, const std::string& name, int term_ms = 5000);

// One process of a deployment, found running by its pid in endpoints.json.
struct deployed_process {
  std::string name;  // "watcher", "audit", "trainer-2", ...
  pid_t pid = 0;
  bool stopped = false;  // set by stop_processes
};

// The processes endpoints.json `e` records for `root` that still run
// (is_process_of): the watcher first, then the services in start order.
std::vector<deployed_process> running_processes(const layout::endpoints& e, const std::string& root);

// Stops them: the watcher first (it stops its services itself), then what
// still runs, every one SIGTERM then SIGKILL. Sets `stopped` on each that is
// gone; returns how many would not stop.
int stop_processes(std::vector<deployed_process>& ps, const std::string& root);

// "watcher (pid 12), audit (pid 13)".
std::string describe(const std::vector<deployed_process>& ps);

// This machine's name, as service_main uses it in node ids (<service>@<host>).
std::string host_name();


}  // namespace loom::cli
