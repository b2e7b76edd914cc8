// The ingest service's request logic: imports, pulls and verifies as tasks
// (tasks.hpp), their progress, the dataset catalogue (importer/catalog.hpp)
// with each dataset's shard files checked cheaply on every read (a missing or
// resized shard makes it "damaged"), its rejects page by page, and the sync
// endpoints (sync_service.hpp). Runs inside the supervised service actor; the
// task runner and the sync server outlive restarts of the actor (made once in
// start_extra). Requests reach their handler through a handler_table built in
// the constructor; wire.hpp maps their messages.
// Every request acts for one tenant (acting_tenant): datasets and tasks of
// another tenant answer not_found, as if they did not exist; admins act
// across tenants.
#pragma once

#include "libs/runtime/handler_table.hpp"
#include "libs/runtime/service_logic.hpp"
#include "libs/status/status.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loom::store {
class database;
}
namespace loom::v1 {
class ImportDatasetRequest;
class ListDatasetsRequest;
class DatasetStatusRequest;
class ListRejectsRequest;
class VerifyDatasetRequest;
class GetTaskRequest;
class CancelTaskRequest;
class SyncInfoRequest;
class PullDatasetRequest;
class PlaceDatasetRequest;
}  // namespace loom::v1

namespace loom::ingest {

class task_runner;
struct task_info;
struct sync_endpoint;

struct ingest_parts {
  std::shared_ptr<task_runner> tasks;  // null: imports unavailable (tests of the catalogue)
  store::database* db = nullptr;       // the actor's connection: catalogue reads
  std::string datasets_root;           // <data>/datasets
  // Incremental sync; empty when no sync server runs.
  std::function<result<sync_endpoint>()> sync_info;
  // Lets key `peer_key` read `tenant`'s `dataset` from the sync server (sync_service::grant).
  std::function<status(const std::string& peer_key, const std::string& tenant, const std::string& dataset,
                       const std::string& principal)>
      sync_grant;
  // Starts a pull of `source_tenant`'s `dataset` from the sync server at
  // `endpoint` with key `public_key` into `tenant`'s dataset here.
  std::function<result<task_info>(const std::string& tenant, const std::string& dataset, const std::string& endpoint,
                                  const std::string& public_key, const std::string& source_tenant,
                                  const std::string& principal)>
      pull;
  // The trainer nodes an import may place shards on (roster.hpp); empty:
  // nodes are not checked (tests of the catalogue).
  std::function<result<std::vector<std::string>>()> trainer_nodes;
  // Where an import that names no nodes places its shards: the trainer nodes
  // of this ingest's zone in the roster; none (or no roster): "local".
  std::function<result<std::vector<std::string>>()> own_trainer_nodes;
};

// The tenant a request acts for: the token's, or `for_tenant` when the caller
// may name another — an admin, or this deployment's own scheduler or trainer
// key (peer "scheduler" / "trainer": they ask for a job's tenant). Anyone else
// naming a tenant not its own is refused (permission_denied naming the
// tenant, the caller's role, tenant and key); a malformed name is
// invalid_argument.
result<std::string> acting_tenant(const runtime::call_context& ctx, const std::string& for_tenant);

class ingest_logic final : public runtime::service_logic {
 public:
  explicit ingest_logic(ingest_parts parts);
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override {
    return table_.dispatch(type, body, ctx);
  }

 private:
  runtime::handled import_dataset(const loom::v1::ImportDatasetRequest& req, const runtime::call_context& ctx);
  runtime::handled list_datasets(const loom::v1::ListDatasetsRequest& req, const runtime::call_context& ctx);
  runtime::handled dataset_status(const loom::v1::DatasetStatusRequest& req, const runtime::call_context& ctx);
  runtime::handled list_rejects(const loom::v1::ListRejectsRequest& req, const runtime::call_context& ctx);
  runtime::handled verify_dataset(const loom::v1::VerifyDatasetRequest& req, const runtime::call_context& ctx);
  runtime::handled get_task(const loom::v1::GetTaskRequest& req, const runtime::call_context& ctx);
  runtime::handled cancel_task(const loom::v1::CancelTaskRequest& req, const runtime::call_context& ctx);
  runtime::handled sync_info(const loom::v1::SyncInfoRequest& req, const runtime::call_context& ctx);
  runtime::handled pull_dataset(const loom::v1::PullDatasetRequest& req, const runtime::call_context& ctx);
  runtime::handled place_dataset(const loom::v1::PlaceDatasetRequest& req, const runtime::call_context& ctx);

  ingest_parts p_;
  runtime::handler_table table_{"ingest"};
};

}  // namespace loom::ingest
