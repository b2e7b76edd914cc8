// The deployment's keys as `loom up` and `loom keys init` set them up:
// created on a fresh data dir, never silently replaced once state depends on
// them (tokens were signed with the token key, the deployment ran with its
// CURVE keys, checkpoints were signed with the checkpoint key). A missing,
// damaged or exposed key is an error that names the file and how to restore
// it; only `loom keys init --force` re-creates one, saying what that breaks.
// Stateless functions over files; one command's main thread.
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/status/status.hpp"

#include <string>
#include <vector>

namespace loom::cli {

// ensure_keys (cli.hpp) creates what a fresh data dir lacks and checks every
// key it finds: loadable, and no secret under keys/ readable by group or others.

// `loom keys init --force`: re-creates every key that is missing or damaged
// (the damaged file is kept as <file>.replaced-<unix time>), re-derives a
// CURVE public key from its intact secret, re-mints admin.token when it does
// not verify, then runs ensure_keys. Returns one line per change saying what
// it invalidates (empty: nothing needed re-creating). A key that is only
// exposed (mode) is not replaced: that is chmod's job, and the error says so.
// REQUIRES: the deployment is stopped (the caller holds the data dir lock).
result<std::vector<std::string>> recreate_keys(const layout::paths& p);

}  // namespace loom::cli
