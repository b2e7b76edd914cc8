// wire: the ingest service's protobuf <-> internal mapping, the only ingest
// files besides the logic's handler table that see loom.v1 messages: an
// import request into import_options, a task into TaskInfo, catalogue rows
// (dataset, shard, reject) into DatasetInfo / ShardPlacement / Reject, and the
// sync server's endpoint into SyncInfoReply. Pure functions; any thread.
#pragma once

#include "services/ingest/importer/catalog.hpp"
#include "services/ingest/importer/import_options.hpp"
#include "services/ingest/sync_service.hpp"
#include "services/ingest/tasks.hpp"

#include <string>

namespace loom::v1 {
class ImportDatasetRequest;
class TaskInfo;
class DatasetInfo;
class ShardPlacement;
class Reject;
class SyncInfoReply;
}  // namespace loom::v1

namespace loom::ingest {

// What the request asks for, over import_options' defaults: an empty profile,
// a zero memory budget, no nodes, no deny list, no text field keep them. The
// path is taken as it is (the logic checks it is absolute).
import_options import_options_from_wire(const loom::v1::ImportDatasetRequest& r);

void to_wire(const task_info& t, loom::v1::TaskInfo* out);

// Whether a dataset can be trained on, and why not: "damaged" with the damage
// when there is one, else "empty" when it has no tokens (every document
// rejected, or a source with none: a job on it would train on nothing), else
// the row's own state. `reason` is "" when ready.
struct readiness {
  std::string state, reason;
};
readiness readiness_of(const dataset_row& d, const std::string& damage);

// A catalogue row as the client sees it: `dir` is where its files are;
// non-empty `damage` makes it "damaged" with that text (readiness_of).
void to_wire(const dataset_row& d, const std::string& dir, const std::string& damage, loom::v1::DatasetInfo* out);
// `problem`: what the file check found wrong with the shard ("" = nothing).
void to_wire(const shard_row& s, const std::string& problem, loom::v1::ShardPlacement* out);
void to_wire(const reject_row& r, loom::v1::Reject* out);

// `granted_tenant`: the tenant whose dataset SyncInfo granted ("" = none).
void to_wire(const sync_endpoint& e, const std::string& granted_tenant, loom::v1::SyncInfoReply* out);

}  // namespace loom::ingest
