// config: the ingest service's own settings, parsed strictly before
// service_main starts — a bad value stops the service at start with the
// variable named (exit 2), never a silent default.
//
//   LOOM_INGEST_SYNC_BIND   where the dataset sync server listens:
//                           tcp://HOST:PORT (HOST may be *, PORT 1..65535 or *);
//                           default: the deployment's (`loom up --listen/--ports`:
//                           endpoints.json's "data" port on the listen address,
//                           loopback and a free port unless told otherwise).
//
// Every command-line argument is service_main's (libs/runtime/service.hpp).
// The import roots come from endpoints.json (`loom up --import-root`), read
// in ingest_service.cpp. Plain values.
#pragma once

#include "libs/status/status.hpp"

#include <functional>
#include <string>

namespace loom::ingest {

struct ingest_config {
  std::string sync_bind;  // "" = the deployment's (runtime::data_bind)
};

// `env` looks a variable up (std::getenv in the service; a map in tests).
using env_lookup = std::function<const char*(const char*)>;
result<ingest_config> load_config(const env_lookup& env);

}  // namespace loom::ingest
