// loom-ingest: the edge-side data engine — imports (clean, dedup, PII,
// licences, annotations, tokenize, 16 MiB shards) as tasks, the dataset
// catalogue in the state store, and incremental sync between sites.
// Wiring only: config.hpp reads the settings, ingest_service.hpp builds the
// parts, libs/runtime runs them.
#include "libs/runtime/service.hpp"
#include "services/ingest/config.hpp"
#include "services/ingest/importer/catalog.hpp"
#include "services/ingest/ingest_service.hpp"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  using namespace loom;
  auto cfg = ingest::load_config([](const char* k) -> const char* { return std::getenv(k); });
  if (!cfg) {
    std::fprintf(stderr, "loom-ingest: %s\n", cfg.err().message.c_str());
    return 2;
  }
  ingest::ingest_handles parts;  // weak: the handle start_extra returns owns them
  runtime::service_spec spec;
  spec.name = "ingest";
  spec.migrations = ingest::ingest_migrations;
  spec.start_extra = [&parts, &c = *cfg](runtime::service_env& env) { return ingest::start_parts(env, c, parts); };
  spec.make_logic = [&parts](runtime::service_env& env) { return ingest::make_logic(env, parts); };
  return runtime::service_main(argc, argv, spec);
}
