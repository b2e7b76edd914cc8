// Durable file helpers: whole-file reads, atomic publish (temp -> fsync ->
// rename -> fsync dir), private (0600) files for keys and tokens.
// Stateless functions; safe from any thread for distinct paths.
#pragma once

#include "libs/status/status.hpp"

#include <cerrno>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace loom::files {

// An error for the failed system call `what` on `path`, from errno `e`:
// ENOENT not_found, EACCES/EPERM permission_denied, ENOSPC/EDQUOT/EFBIG
// resource_exhausted (a full disk is the caller's to report), else internal;
// the message is "<what> <path>: <strerror>".
error errno_error(const std::string& what, const std::string& path, int e = errno);

// Writes all of `data` to `fd`, retrying short writes and EINTR; a failed
// write(2) is errno_error("write", path). `path` only names the file in errors.
status write_all(int fd, std::string_view data, const std::string& path);
// write_all with pwrite(2): `data` lands at `offset`; the file offset is left alone.
status pwrite_all(int fd, std::string_view data, std::uint64_t offset, const std::string& path);

// Reads the whole file. not_found when it does not exist.
result<std::string> read_file(const std::string& path);

// Writes `data` to `path` atomically: a reader sees the old or the new
// content, never a mix. fsyncs the file and its directory; any failed
// write/fsync/rename is an error naming the path. The new file gets
// masked_mode(mode).
status write_atomic(const std::string& path, std::string_view data, mode_t mode = 0644);
// The same for data in pieces, written in order as one file: a large file
// made of a header and views of buffers the caller keeps (no joined copy).
status write_atomic_parts(const std::string& path, std::span<const std::string_view> parts, mode_t mode = 0644);

// `mode` narrowed by this process's umask: the mode open(O_CREAT) gives a new
// file. Processes that keep their files private (umask 077: the launcher, the
// watcher, every service) thereby get 0600 even where a caller asks for 0644.
mode_t masked_mode(mode_t mode);

// fsync the directory holding entries that were just created or renamed.
status fsync_dir(const std::string& dir);

// mkdir -p with `mode` for directories it creates.
status make_dirs(const std::string& dir, mode_t mode = 0755);

// Current user's home-relative default data dir resolution:
// explicit (if non-empty) > $LOOM_HOME > ~/.local/share/edgeloom
std::string resolve_data_dir(const std::string& explicit_dir);

}  // namespace loom::files
