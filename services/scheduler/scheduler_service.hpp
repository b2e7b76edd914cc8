// scheduler_service: the scheduler's logic put together for one service
// process — its store connection and a second one for group commits, the audit
// record of every job event, the ingest probe for datasets at submit and the
// roots stages may read from. service_main calls it at start and after every
// crash of the service actor (the logic reloads from the store).
#pragma once

#include "services/scheduler/config.hpp"

#include <memory>

namespace loom::runtime {
struct service_env;
class service_logic;
}  // namespace loom::runtime

namespace loom::scheduler {

std::unique_ptr<runtime::service_logic> make_logic(runtime::service_env& env, const scheduler_config& cfg);

}  // namespace loom::scheduler
