// `loom keys import --from DIR`: a deployment's keys handed in read-only (a
// Kubernetes Secret volume, a compose secret) copied into <data>/keys as the
// services want them: owned by the user that runs them, 0600, in 0700
// directories. The services refuse a key group or others may read, and a
// Secret volume is root's, group-readable with an fsGroup, and made of
// symlinks into a hidden "..data" directory; so an init container copies it.
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <vector>

namespace loom::cli {

// Copies every regular file under `from` (symlinks followed; entries whose
// name starts with ".." — a Secret volume's own — skipped) to the same
// relative path under `keys_dir`, each written atomically with mode 0600.
// Returns the relative paths copied, sorted. not_found when `from` is not a
// directory or holds no file; invalid_argument for a file larger than 1 MiB
// (no key is) or a name that would leave keys_dir; the error names the file.
result<std::vector<std::string>> import_keys(const std::string& from, const std::string& keys_dir);

}  // namespace loom::cli
