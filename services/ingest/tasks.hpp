// The ingest service's tasks: imports (importer/importer.hpp), pulls from
// another site (sync) and full verifies of a dataset (verify.hpp), run one at
// a time on the runner's own thread — an import is budgeted to the node's
// memory, so two at once would double it.
// Each task has a live task_info the service answers GetTask with; a
// finished import is recorded in the catalogue (its own state-store
// connection, opened on the runner thread) and audited ("dataset.import",
// decision allow or error, the summary as payload).
//
//   start_*() ─▶ queued ─▶ running (progress into task_info) ─▶ succeeded | failed | cancelled
//                  └───────── cancel() ─────────────────────────▶ cancelled (stop flag)
//
// Tasks live in memory: a restarted service has forgotten them (a killed
// import published nothing; the previous version of its dataset stands), but
// their ids are never reused: the counters persist in <state_dir>/task-ids.json,
// and the runner removes what killed imports left in .staging when it starts.
// Imports read only inside the import roots (files/confine.hpp).
// Datasets are per tenant: every task names its tenant, and a tenant's
// datasets lie under layout::tenant_datasets_root(datasets_root, tenant).
// Thread-safe: every public member may be called from any thread.
#pragma once

#include "libs/status/status.hpp"
#include "services/ingest/importer/import_options.hpp"
#include "services/ingest/task_ids.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace loom::audit {
struct record;
}

namespace loom::ingest {

// A task as GetTask shows it (wire.hpp: loom.v1.TaskInfo). Plain value.
struct task_info {
  std::string id;      // imp-000001 / pull-000001 / ver-000001 (unique across restarts)
  std::string kind;    // import | pull | verify
  std::string tenant;  // whose dataset it works on (names are per tenant)
  std::string dataset, source;
  std::string state;   // queued | running | succeeded | failed | cancelled
  std::string phase;   // read | write | publish | done (imports); manifest | chunks | rebuild (pulls); hash (verify)
  std::string message;  // why it failed
  std::uint64_t files = 0, bytes_read = 0, documents = 0, kept = 0, rejected = 0, duplicates = 0, tokens = 0;
  std::uint32_t shards = 0;
  std::uint64_t bytes_sent = 0;  // pulls: chunk bytes received over the wire
  double elapsed_s = 0, mb_per_s = 0;
  std::string report_json;
  std::uint64_t started_unix_ns = 0, finished_unix_ns = 0;
};

struct task_runner_options {
  std::string datasets_root;  // <data>/datasets
  std::string database_url;   // the catalogue's store ("" = no catalogue: tests)
  // Audit sink for task outcomes (emit() of the service's emitter); may be empty.
  std::function<void(audit::record)> audit;
  std::string zone, node;     // for the audit records
  std::size_t keep_finished = 1000;  // finished tasks remembered for GetTask
  // Where imports may read (layout::import_roots): the source must lie inside
  // one, and so must every file read under it. Empty: no confinement (tests).
  std::vector<std::string> import_roots;
  // <data>/ingest: task-ids.json. "" = counters in memory only (tests).
  std::string state_dir;
};

class catalog;

// What a task body may do while it runs.
struct task_context {
  const std::atomic<bool>* stop = nullptr;
  // The catalogue on the runner thread (nullptr without a store).
  std::function<result<ingest::catalog*>()> open_catalog;
  // Updates the task's live info under the runner's lock.
  std::function<void(const std::function<void(task_info&)>&)> update;
};

class task_runner {
 public:
  explicit task_runner(task_runner_options o);
  ~task_runner();  // cancels what runs, forgets the queue, joins

  // Queues an import of opt.source into `tenant`'s dataset opt.dataset
  // (progress, stop, the tenant's datasets root and the reader's roots are set
  // here). invalid_argument for bad options (validate()), permission_denied
  // for a source outside the import roots (naming it and the roots),
  // not_found for a missing source inside them, conflict while a task for the
  // same dataset of the tenant is queued or running.
  result<task_info> start_import(import_options opt, const std::string& tenant, const std::string& principal);
  // Queues a full verify of `tenant`'s `dataset` (verify.hpp). not_found when
  // there is no such dataset directory; conflict as above.
  result<task_info> start_verify(const std::string& tenant, const std::string& dataset, const std::string& principal);
  const std::vector<std::string>& import_roots() const { return opt_.import_roots; }
  // Where `tenant`'s datasets lie (libs/layout/dataset_dirs.hpp).
  std::string datasets_root(const std::string& tenant) const;
  // Queues a generic task (pulls) on `tenant`'s `dataset`: `body` runs on the
  // runner thread and fills the task_info through ctx.update; its error fails
  // the task.
  using task_body = std::function<status(task_context&)>;
  result<task_info> start(const std::string& kind, const std::string& tenant, const std::string& dataset,
                          const std::string& source, const std::string& principal, task_body body);

  std::optional<task_info> get(const std::string& id) const;
  // The newest task (running or finished) for `tenant`'s `dataset`.
  std::optional<task_info> last_for(const std::string& tenant, const std::string& dataset) const;
  // not_found for an unknown id; conflict when it already ended.
  result<task_info> cancel(const std::string& id);

  // Records a dataset directory of `tenant` that appeared by other means (a
  // pull) in the catalogue; runs on the caller's thread with its own connection.
  status record_dataset_dir(const std::string& tenant, const std::string& dataset, const std::string& import_id);

 private:
  struct task {
    task_info info;
    task_body body;
    std::string principal;
    std::atomic<bool> stop{false};
  };
  result<task_info> enqueue(std::shared_ptr<task> t);
  void run();
  void finish(task& t, const status& outcome);
  void audit_outcome(const task& t, const status& outcome);

  const task_runner_options opt_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<task>> tasks_;  // by id
  std::deque<std::shared_ptr<task>> queue_;
  std::deque<std::string> finished_;                   // ids, oldest first
  task_ids ids_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace loom::ingest
