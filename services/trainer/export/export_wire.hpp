// export_wire: the protobuf face of a trainer's model checks and exports
// (issue 25 item 3) — the only export file that sees *.pb.h:
//   StartModelExport   operator (admin for a compliance override): queue a check or export
//   GetModelExport     operator: its state, checks and files (the caller's tenant's only)
//   FetchModelExport   operator: a chunk of a done export's file, with its SHA-256
//   EndModelExport     operator: cancel it, or delete its files once fetched
// and the registry_port that reaches the scheduler (ResolveModelVersion,
// RecordModelExport) with this trainer's own CURVE key and service token,
// naming the caller. The handlers run in the service actor and only touch the
// export_tasks table (fetch reads at most 8 MiB); the work runs on its thread.
#pragma once

#include "services/trainer/export/export_tasks.hpp"

#include <memory>

namespace loom::runtime {
class handler_table;
struct service_env;
}  // namespace loom::runtime

namespace loom::trainer {

// Registers the four requests. `tasks` null: each answers unavailable.
void add_export_handlers(runtime::handler_table& table, std::shared_ptr<export_tasks> tasks);

// This trainer's export tasks over the real scheduler, artefacts under
// <data>/trainer/exports/<node>. At an edge site none run: the cloud's data
// is not there (every request answers unimplemented saying so).
std::shared_ptr<export_tasks> start_model_exports(runtime::service_env& env);

}  // namespace loom::trainer
