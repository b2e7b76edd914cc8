#include "services/ingest/config.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/files/files.hpp"
#include "libs/runtime/service.hpp"

#include <cstdio>

namespace loom::ingest {

task_runner_options runner_options(runtime::service_env& env) {
  task_runner_options o;
  o.datasets_root = env.paths.root + "/datasets";
  o.database_url = env.database_url;
  audit::emitter* em = env.audit;
  o.audit = [em](audit::record r) { em->emit(std::move(r)); };
  o.zone = env.zone;
  o.node = env.node_id;
  o.state_dir = env.paths.state("ingest");
  if (auto st = files::make_dirs(env.paths.imports()); !st)
    std::fprintf(stderr, "loom-ingest: %s\n", st.err().to_string().c_str());
  std::vector<std::string> skipped;
  o.import_roots = layout::import_roots(env.paths, env.eps, &skipped);
  for (const auto& why : skipped) std::fprintf(stderr, "loom-ingest: not an import root: %s\n", why.c_str());
  std::string roots;
  for (const auto& r : o.import_roots) roots += " " + r;
  std::fprintf(stderr, "loom-ingest: import roots:%s\n", roots.c_str());
  return o;
}

}  // namespace loom::ingest
