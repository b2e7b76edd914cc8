// aggregator_service: builds the aggregator's parts for service_main. The
// engine (every job; reloaded from <data>/aggregator at start) and the delta
// server (the sites' socket) are made once in start_extra and outlive restarts
// of the service actor; the logic made after each restart shares the engine.
#pragma once

#include "libs/runtime/service.hpp"
#include "services/aggregator/aggregator_logic.hpp"

#include <memory>
#include <string>

namespace loom::aggregator {

class engine;

// The parts start_parts made, for make_logic (weak: the handle start_extra returned owns them).
struct aggregator_handles {
  std::weak_ptr<engine> jobs;
  delta_endpoint where;
  std::string data_dir;  // <data>: InspectCheckpoint's jobs/ and checkpoint key
};

// $LOOM_AGGREGATOR_DELTA_BIND ("" when unset: the deployment's data port on
// its listen address, runtime::data_bind): invalid_argument with a hint when
// it is not an endpoint to listen on.
result<std::string> delta_bind_from(const char* value);

// LOOM_AGGREGATOR_RESIDENT_FRAGMENTS: how many fragments of a job stay in
// memory (engine_options::resident_fragments; unset: its default, 0: every
// one). invalid_argument naming the value.
result<int> resident_fragments_from(const char* value);

result<std::shared_ptr<void>> start_parts(runtime::service_env& env, const std::string& bind, aggregator_handles& out);
std::unique_ptr<runtime::service_logic> make_logic(const aggregator_handles& h);

}  // namespace loom::aggregator
