// export_tasks: the model checks and exports a cloud trainer runs for its
// callers (issue 25 item 3; the body is export_job.hpp). A client starts one
// (StartModelExport), follows it (GetModelExport), fetches a done export's
// files in chunks (FetchModelExport) and ends it (EndModelExport), all
// through the trainer's ordinary request socket (export_wire.hpp).
//
//   start() ─▶ queued ─▶ running (phase: resolve, checks, write, record) ─▶ done | failed
//                 └──────── end() ─────────────────────────────────────────▶ cancelled
//   done: files (if any) kept under <root>/<id>/artefact until end() or keep_done
//
// One export runs at a time, on the runner's own thread: a check scores the
// held-out text with the CPU engine on every core, and an export holds the
// model's parameters in memory. An export belongs to its caller's tenant:
// another tenant's id answers not_found, as an unknown one does (admins see
// every tenant's). Tasks live in memory: a restarted trainer has forgotten
// them and removes what they left under `root` when it starts.
// Thread-safe: every public member may be called from any thread.
#pragma once

#include "libs/status/status.hpp"

#include <atomic>
#include <chrono>
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

namespace loom::trainer {

// Who asked: the trainer's gateway's verified view of the caller.
struct export_caller {
  std::string principal, role, tenant = "default", peer;
  bool admin() const { return role == "admin"; }
};

// What the client asked for (loom.v1.StartModelExportRequest).
struct export_request {
  std::string version;
  std::string action;    // check | export
  std::string format;    // export: hf | gguf
  std::string type;      // gguf: f32 | f16 | q8_0 (set to f32 by validate when empty)
  std::string held_out;  // "" = the version's own data
  std::optional<double> max_loss;
  bool override_compliance = false;
  std::string reason;
  std::string out;  // where the client writes it (recorded only)
};

// invalid_argument naming the field for a malformed request; permission_denied
// for a compliance override by a non-admin. Fills in the gguf type's default.
status validate(export_request& r, const export_caller& c);

struct export_check {
  std::string name, status, detail;
  double seconds = 0;
};

struct export_file {
  std::string name;  // relative to the artefact directory: "model.safetensors", "x-mv-000003-q8_0.gguf"
  std::uint64_t bytes = 0;
  std::string sha256;
};

// An export as GetModelExport shows it (loom.v1.ModelExportInfo). Plain value.
struct export_info {
  std::string id;     // exp-<16 hex>
  std::string state;  // queued | running | done | failed | cancelled
  std::string phase;  // resolve | checks | write | record
  std::string action, version, model, checkpoint, format, type, trainer;
  std::vector<export_check> checks;
  bool passed = false;
  errc error_code = errc::ok;  // failed: why
  std::string error;
  std::vector<export_file> files;
  std::string output_sha256;
  std::uint64_t output_bytes = 0;
  double check_seconds = 0, export_seconds = 0;
  bool recorded = false;
};

// What a body may do while it runs (on the runner thread).
struct export_context {
  const std::atomic<bool>* stop = nullptr;  // set by end(): return soon
  std::string artefact_dir;                 // <root>/<id>/artefact: absent; create it to write files
  // Changes the task's live info under the table's lock.
  std::function<void(const std::function<void(export_info&)>&)> update;
};
// Runs one export; its error fails the task (code and message kept). On
// success the info it filled (checks, passed, files, recorded) stands.
using export_body = std::function<status(const export_request&, const export_caller&, export_context&)>;

struct export_tasks_options {
  std::string root;      // where artefacts are kept: <data>/trainer/exports/<node>; emptied at start
  std::string node;      // this trainer's node id, shown in every info
  std::size_t max_waiting = 4;    // queued and running together; more: resource_exhausted
  std::size_t max_waiting_per_tenant = 2;  // so one tenant cannot fill the queue for every other
  std::size_t keep_finished = 100;  // ended tasks remembered for GetModelExport
  // A done export's files are deleted this long after it ended (a client
  // that never fetched or ended it), then its info says so.
  std::chrono::seconds keep_files{3600};
  // Checked at start(): held_out confined to the import roots, say.
  std::function<status(const export_request&)> admit;
  std::function<std::chrono::steady_clock::time_point()> now = [] { return std::chrono::steady_clock::now(); };
};

class export_tasks {
 public:
  export_tasks(export_tasks_options o, export_body body);
  ~export_tasks();  // shutdown()
  export_tasks(const export_tasks&) = delete;
  export_tasks& operator=(const export_tasks&) = delete;

  // Queues it. validate()'s and admit's errors; resource_exhausted when
  // max_waiting are already waiting or running, or max_waiting_per_tenant of
  // the caller's tenant; unavailable after shutdown().
  result<export_info> start(export_request r, const export_caller& c);
  // not_found for an unknown id or another tenant's (non-admin callers).
  result<export_info> get(const std::string& id, const export_caller& c);

  struct chunk {
    std::string data, sha256;
    std::uint64_t offset = 0, file_bytes = 0;
  };
  // Up to max_bytes (0 = default_chunk, at most max_chunk) of `file` of a done
  // export from `offset`. not_found as get(), and for a file the export does
  // not list or whose files were deleted; conflict before it is done;
  // invalid_argument for an offset past the end.
  result<chunk> fetch(const std::string& id, const std::string& file, std::uint64_t offset, std::uint32_t max_bytes,
                      const export_caller& c);
  // A queued or running export is cancelled (stop flag; its state is
  // cancelled once the body returns), a done one's files are deleted. not_found as get().
  result<export_info> end(const std::string& id, const export_caller& c);

  // Stops the runner (the running body sees stop) and joins it; later calls
  // answer unavailable. Idempotent.
  void shutdown();

  static constexpr std::uint32_t default_chunk = 4u << 20;  // 4 MiB: well under the 16 MiB body cap
  static constexpr std::uint32_t max_chunk = 8u << 20;

 private:
  struct task {
    export_info info;
    export_request req;
    export_caller caller;
    std::atomic<bool> stop{false};
    std::chrono::steady_clock::time_point ended{};
  };
  std::shared_ptr<task> find(const std::string& id, const export_caller& c);  // REQUIRES: mu_ held
  void run();
  void retire(std::chrono::steady_clock::time_point now);  // REQUIRES: mu_ held
  std::string dir_of(const std::string& id) const { return opt_.root + "/" + id; }

  const export_tasks_options opt_;
  const export_body body_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<task>> tasks_;
  std::deque<std::shared_ptr<task>> queue_;
  std::deque<std::string> ended_;  // ids, oldest first
  std::size_t waiting_ = 0;        // queued + running
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace loom::trainer
