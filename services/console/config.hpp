// config: the console's own settings, parsed strictly before service_main
// starts (a bad value stops it at start, naming the option: exit 2).
//
//   --https HOST:PORT     where HTTPS listens; default: the console's port in
//                         endpoints.json (`loom up` picks it) on the listen address
//   --cert FILE --cert-key FILE
//                         a certificate and its key (PEM); default: a
//                         self-signed pair made on first start under
//                         <data>/console/tls/
//   --templates DIR       where submit-from-template looks first (then
//                         $LOOM_TEMPLATES, the build tree's templates/, the
//                         install path), as `loom job submit` does
//
// Every other argument is service_main's (libs/runtime/service.hpp). Plain values.
#pragma once

#include "libs/status/status.hpp"

#include <functional>
#include <string>
#include <vector>

namespace loom::console {

struct console_config {
  std::string https_host;  // "" = from endpoints.json
  int https_port = -1;     // -1 = from endpoints.json
  std::string cert, cert_key;
  std::vector<std::string> template_dirs;
  std::vector<std::string> runtime_args;  // argv for service_main, argv[0] first
};

using env_lookup = std::function<const char*(const char*)>;

// argv: the whole command line, argv[0] first. exe_dir: the binary's directory
// (its ../../templates is the build tree's).
result<console_config> load_config(const std::vector<std::string>& argv, const env_lookup& env,
                                   const std::string& exe_dir);

// "tcp://HOST:PORT" (an endpoints.json data endpoint) or "HOST:PORT" -> host, port.
result<std::pair<std::string, int>> host_port(const std::string& endpoint);

}  // namespace loom::console
