// Fault points for the chaos harness (tests/chaos): a process started with
// LOOM_FAULTS_DIR=D fails an operation while the file D/<point> exists — the
// harness creates and removes those files while the deployment runs, so a
// fault comes and goes without a restart. Without the variable (every
// deployment but the harness's) a check is one getenv. Points: "fsync" (fsync and fdatasync fail with EIO, as a
// failing disk or a full thin volume makes them); "clock" (a signed number of
// seconds the wall clock is stepped by: read by loom::wall_now,
// libs/status/unix_time.hpp, which every product read of the date goes
// through). Thread-safe.
#pragma once

#include "libs/status/status.hpp"

#include <string_view>

namespace loom::files {

// Whether fault point `point` is armed now (false unless LOOM_FAULTS_DIR is set).
bool fault_armed(std::string_view point);

// fsync(2) / fdatasync(2) of `fd`, failing with errno EIO while "fsync" is
// armed: every durable write of the product calls these instead of the system
// calls, so a test can make them fail.
int fsync_fd(int fd);
int fdatasync_fd(int fd);

// Whether `e` is a storage fault that may pass — a full disk or quota
// (ENOSPC, EDQUOT, EFBIG: errno_error's resource_exhausted) or an I/O error
// (EIO) — by its code or, where a layer above rewrapped it, by the system's
// words for them in its message. What a writer may wait out and write again.
bool storage_fault(const error& e);

}  // namespace loom::files
