// Files that hold secrets (the audit keyring's and the at-rest keys, libs/auditchain
// and libs/atrest). Created exclusively
// (a key is never overwritten: replacing a day key would make that day's
// payloads unreadable), with mode 0600, durably (temp -> fsync -> link ->
// fsync dir); read only when no one but the owner may read them.
// Stateless functions; safe from any thread for distinct paths.
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <string_view>
#include <sys/types.h>

namespace loom::files::secret {

// Publishes `data` at `path` unless it exists (then already_exists, nothing
// changed). Readers see no file or the whole file.
status create_exclusive(const std::string& path, std::string_view data, mode_t mode = 0600);

// Reads a secret file: not_found when missing; permission_denied when its mode
// grants group or others any access.
result<std::string> read_private(const std::string& path);

// Overwrites the file with zeros, fsyncs, unlinks it and fsyncs its
// directory. On a journaling or copy-on-write file system old blocks may
// survive on disk; what counts is that no readable copy of the key remains.
status shred(const std::string& path);

// mkdir -p with 0700 for what it creates.
status make_private_dir(const std::string& dir);

bool exists(const std::string& path);

}  // namespace loom::files::secret
