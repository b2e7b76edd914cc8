// loom-aggregator: cross-site outer optimisation (DiLoCo) on the cloud side.
#include "libs/runtime/service.hpp"
#include "services/aggregator/aggregator_logic.hpp"

int main(int argc, char** argv) {
  loom::runtime::service_spec spec;
  spec.name = "aggregator";
  spec.make_logic = [](loom::runtime::service_env&) {
    return std::make_unique<loom::aggregator::aggregator_logic>();
  };
  return loom::runtime::service_main(argc, argv, spec);
}
