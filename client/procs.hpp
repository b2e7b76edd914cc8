// Process helpers for the local launcher: spawning detached children with
// their output in a log file, and checking that a pid is still one of ours.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace loom::cli {

// Directory holding the `loom` binary (the services sit beside it), unless
// $LOOM_BIN_DIR says otherwise.
std::string bin_dir();

// fork + exec `argv` with stdin from /dev/null, stdout/stderr appended to
// `log`, and every other descriptor closed (so a parent's pipes, e.g. a test
// runner's, are not held open). `new_session` detaches it (setsid).
// Returns the child's pid, or -1.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log, bool new_session);

// True while `pid` runs (not a zombie) and its executable is an EdgeLoom binary.
bool is_loom_process(pid_t pid);

// Sends `sig` to `pid` when it is one of ours; then waits up to `wait_ms`
// for it to go. Returns true when it is gone.
bool stop_process(pid_t pid, int sig, int wait_ms);

// Free TCP ports on 127.0.0.1, all distinct.
std::vector<int> free_ports(int n);

}  // namespace loom::cli
