// loom-aggregator: cross-site outer optimisation (DiLoCo) on the cloud side.
// Wiring only: aggregator_service.hpp builds the engine and the delta server,
// libs/runtime runs the rest.
#include "libs/runtime/service.hpp"
#include "services/aggregator/aggregator_service.hpp"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  using namespace loom;
  auto bind = aggregator::delta_bind_from(std::getenv("LOOM_AGGREGATOR_DELTA_BIND"));
  if (!bind) {
    std::fprintf(stderr, "loom-aggregator: %s\n", bind.err().message.c_str());
    return 2;
  }
  aggregator::aggregator_handles parts;
  runtime::service_spec spec;
  spec.name = "aggregator";
  spec.start_extra = [&parts, &b = *bind](runtime::service_env& env) { return aggregator::start_parts(env, b, parts); };
  spec.make_logic = [&parts](runtime::service_env&) { return aggregator::make_logic(parts); };
  return runtime::service_main(argc, argv, spec);
}
