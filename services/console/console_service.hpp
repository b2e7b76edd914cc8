// console_service: what the runtime starts for the console. start() makes or
// checks the certificate and starts the HTTPS server (server.hpp) on the
// configured address; the returned handle stops it. The console's ROUTER
// answers only the requests every service answers (Ping, Health): its users
// speak HTTPS.
#pragma once

#include "libs/runtime/service.hpp"
#include "services/console/config.hpp"

#include <memory>

namespace loom::console {

result<std::shared_ptr<void>> start(runtime::service_env& env, const console_config& cfg);
std::unique_ptr<runtime::service_logic> make_logic();

}  // namespace loom::console
