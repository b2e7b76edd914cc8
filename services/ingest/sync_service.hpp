// sync_service: the ingest service's side of incremental sync (libs/cdc,
// issue 5 §9). It serves <data>/datasets (dataset D = <data>/datasets/D) with
// a cdc::sync_server on a ZeroMQ context and ZAP handler of its own (domain
// "loom"), and starts pulls from another site's sync server as "pull" tasks
// of the task runner, which the catalogue records when they succeed.
//
// Who may read: every key the ZAP handler admits — the deployment's own keys
// (<data>/keys/curve/*.pub: the CLI, every service, the trainer) and trusted
// peers (<data>/keys/peers/*.pub, principal = the file's stem). The list is
// re-read on every info() call, so `loom data sync` (which drops the pulling
// site's ingest key into keys/peers/ and then asks for SyncInfo) works without
// a restart. There is no per-dataset rule: an admitted key reads any dataset.
//
//   SyncInfo ─▶ info(): re-read keys ─▶ {endpoint, our public key}
//   PullDataset ─▶ pull(): validate ─▶ task_runner.start("pull") ─▶ runner thread:
//       cdc::sync_client(our key).pull(endpoint, D, <data>/datasets/D)
//       ─▶ record_dataset_dir(D) ─▶ task_info: done, bytes_sent, files, elapsed
//
// Made once in start_extra; outlives restarts of the service actor.
// Thread-safe: info() and pull() may be called from any thread.
#pragma once

#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <memory>
#include <mutex>
#include <string>

namespace zmq {
class context_t;
}
namespace loom::cdc {
class sync_server;
}

namespace loom::ingest {

class task_runner;
struct task_info;

struct sync_service_options {
  std::string data_dir;                    // <data>: datasets/, keys/curve/, keys/peers/, ingest/
  wire::curve_keypair keys;                // the ingest service's identity: server and client key
  std::string bind = "tcp://127.0.0.1:*";  // config.hpp: $LOOM_INGEST_SYNC_BIND widens it
  std::shared_ptr<task_runner> tasks;      // runs the pulls; required
};

// What a PullDatasetRequest may hold: a dataset name the importer accepts, a
// tcp:// endpoint with a host and a port, a Z85 CURVE public key.
// invalid_argument naming the field otherwise.
status validate_pull(const std::string& dataset, const std::string& endpoint, const std::string& public_key);

// Whether <datasets_root>/<dataset> may be served: ok, or corruption naming
// the dataset and its damaged shard files (shards::check_dataset_dir: a
// missing manifest or shard, a shard of the wrong size). A dataset that does
// not exist is ok here (the sync server answers not_found for it).
status servable(const std::string& datasets_root, const std::string& dataset);

// Where a sync server listens and with which CURVE key (SyncInfoReply).
struct sync_endpoint {
  std::string endpoint, public_key;
};

class sync_service {
 public:
  // Binds the sync server. unavailable when the endpoint cannot be bound;
  // invalid_argument for missing keys or a deployment curve dir that cannot be read.
  static result<std::unique_ptr<sync_service>> start(sync_service_options o);
  ~sync_service();  // stops the server (in-flight packs fail), then its ZAP handler and context
  sync_service(const sync_service&) = delete;
  sync_service& operator=(const sync_service&) = delete;

  // Re-reads the trusted keys, then says where the server listens and with
  // which key. invalid_argument naming the file for a bad key file (the
  // previous list stays in force).
  result<sync_endpoint> info();

  // Starts a pull of `dataset` from the sync server at `endpoint` (whose
  // public key is given) into <data>/datasets/<dataset>. invalid_argument
  // (validate_pull, or our own endpoint), conflict while another task for the
  // dataset is queued or running (an import, say).
  result<task_info> pull(const std::string& dataset, const std::string& endpoint,
                                  const std::string& server_public_z85, const std::string& principal);

  const std::string& endpoint() const;

 private:
  sync_service() = default;
  status reload_keys();

  sync_service_options o_;
  std::unique_ptr<zmq::context_t> ctx_;  // declared first: destroyed last
  std::unique_ptr<wire::zap_handler> zap_;
  std::unique_ptr<cdc::sync_server> server_;
  std::mutex reload_mu_;  // one reload at a time (two SyncInfo calls at once)
};

}  // namespace loom::ingest
