// The ingest service's request logic: imports, pulls and verifies as tasks
// (tasks.hpp), their progress, the dataset catalogue (importer/catalog.hpp)
// with each dataset's shard files checked cheaply on every read (a missing or
// resized shard makes it "damaged"), its rejects page by page, and the sync
// endpoints (sync_service.hpp). Runs inside the supervised service actor; the
// task runner and the sync server outlive restarts of the actor (made once in
// start_extra).
#pragma once

#include "libs/runtime/service_logic.hpp"
#include "libs/status/status.hpp"
#include "loom/v1/ingest.pb.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loom::store {
class database;
}

namespace loom::ingest {

class task_runner;

struct ingest_parts {
  std::shared_ptr<task_runner> tasks;  // null: imports unavailable (tests of the catalogue)
  store::database* db = nullptr;       // the actor's connection: catalogue reads
  std::string datasets_root;           // <data>/datasets
  // Incremental sync; empty when no sync server runs.
  std::function<result<loom::v1::SyncInfoReply>()> sync_info;
  std::function<result<loom::v1::TaskInfo>(const loom::v1::PullDatasetRequest&, const std::string& principal)> pull;
  // The trainer nodes an import may place shards on (roster.hpp); empty:
  // nodes are not checked (tests of the catalogue).
  std::function<result<std::vector<std::string>>()> trainer_nodes;
};

class ingest_logic final : public runtime::service_logic {
 public:
  explicit ingest_logic(ingest_parts parts) : p_(std::move(parts)) {}
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override;

 private:
  runtime::handled import_dataset(const std::string& body, const runtime::call_context& ctx);
  runtime::handled list_datasets(const std::string& body);
  runtime::handled dataset_status(const std::string& body);
  runtime::handled list_rejects(const std::string& body);
  runtime::handled verify_dataset(const std::string& body, const runtime::call_context& ctx);
  runtime::handled get_task(const std::string& body);
  runtime::handled cancel_task(const std::string& body);
  runtime::handled sync_info(const std::string& body);
  runtime::handled pull_dataset(const std::string& body, const runtime::call_context& ctx);

  ingest_parts p_;
};

}  // namespace loom::ingest
