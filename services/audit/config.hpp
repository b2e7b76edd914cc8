// config: the audit service's own settings, parsed strictly before
// service_main starts — a bad value stops the service at start with the
// option or variable named (exit 2), never a silent default or clamp.
//
//   --pull-bind tcp://HOST:PORT       where the PULL socket binds (containers bind
//                                     every interface while peers use the
//                                     endpoints.json name); default: endpoints.json
//   LOOM_AUDIT_KEK_ROTATION_DAYS      age at which the key-encryption key is replaced:
//                                     whole days 1..3650 (default 30)
//   LOOM_AUDIT_RETENTION_DAYS         how long day keys (and so payloads) stay readable:
//                                     whole days 180..36500 (default 180)
//
// Every other argument is service_main's (libs/runtime/service.hpp). Plain values.
#pragma once

#include "libs/status/status.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace loom::audit_service {

struct audit_config {
  std::string pull_bind;  // "" = the pull endpoint in endpoints.json (else tcp://127.0.0.1:*)
  std::chrono::days kek_rotation{30};
  std::chrono::days retention{180};
  std::vector<std::string> runtime_args;  // argv for service_main, argv[0] first
};

// `env` looks a variable up (std::getenv in the service; a map in tests).
using env_lookup = std::function<const char*(const char*)>;

// argv: the whole command line, argv[0] first.
result<audit_config> load_config(const std::vector<std::string>& argv, const env_lookup& env);

}  // namespace loom::audit_service
