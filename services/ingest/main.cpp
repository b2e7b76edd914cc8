// loom-ingest: the edge-side data engine (imports, cleaning, shards, sync).
#include "libs/runtime/service.hpp"
#include "services/ingest/ingest_logic.hpp"

int main(int argc, char** argv) {
  loom::runtime::service_spec spec;
  spec.name = "ingest";
  spec.make_logic = [](loom::runtime::service_env&) { return std::make_unique<loom::ingest::ingest_logic>(); };
  return loom::runtime::service_main(argc, argv, spec);
}
