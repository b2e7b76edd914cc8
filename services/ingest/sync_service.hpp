// sync_service: the ingest service's side of incremental sync (libs/cdc,
// issue 5 §9). It serves this ingest's datasets with a cdc::sync_server on a
// ZeroMQ context and ZAP handler of its own (domain "loom"), and starts pulls
// from another site's sync server as "pull" tasks of the task runner, which
// the catalogue records when they succeed. Datasets are per tenant
// (libs/layout/dataset_dirs.hpp): a request names the dataset and its tenant.
//
// Who may connect: the deployment's own keys (<data>/keys/curve/*.pub,
// principal = the file's stem) and trusted peers (<data>/keys/peers/*.pub,
// principal "peer:<stem>", so a peer file can never pass for a service). The
// list is re-read on every info() call, so `loom data sync` (which drops the
// pulling site's ingest key into keys/peers/ and then asks for SyncInfo)
// works without a restart.
// Who may read what (docs/security.md, "Datasets"):
//  - the deployment's trainer key: any tenant's dataset (it fetches a stage's
//    data.dataset for the job's tenant, which the scheduler named; one data
//    dir is one trust domain);
//  - any other admitted key: only a dataset granted to it by grant() — a
//    SyncInfoRequest naming the dataset and the pulling key, made with a
//    token of the dataset's tenant (or an admin's) — for grant_lifetime;
//  - nobody else; a refusal does not say whether the dataset exists.
//
//   SyncInfo ─▶ info(): re-read keys ─▶ {endpoint, our public key}   [grant(): key may read (tenant, D)]
//   PullDataset ─▶ pull(): validate ─▶ task_runner.start("pull") ─▶ runner thread:
//       cdc::sync_client(our key).pull(endpoint, source tenant, D, <tenant root>/D)
//         accept: check_received_shards (manifest.json against what came; refused → nothing replaced)
//       ─▶ record_dataset_dir(tenant, D) ─▶ task_info: done, bytes_sent, files, elapsed
//
// Made once in start_extra; outlives restarts of the service actor.
// Thread-safe: info(), grant() and pull() may be called from any thread.
#pragma once

#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

namespace zmq {
class context_t;
}
namespace loom::cdc {
class sync_server;
}
namespace loom::audit {
struct record;
}

namespace loom::ingest {

class task_runner;
struct task_info;

struct sync_service_options {
  std::string data_dir;                    // <data>: datasets/, keys/curve/, keys/peers/, ingest/
  wire::curve_keypair keys;                // the ingest service's identity: server and client key
  std::string bind = "tcp://127.0.0.1:*";  // config.hpp: $LOOM_INGEST_SYNC_BIND widens it
  std::shared_ptr<task_runner> tasks;      // runs the pulls; required
  // Audit sink for grants ("dataset.grant"); may be empty. zone/node: for the records.
  std::function<void(audit::record)> audit;
  std::string zone, node;
};

// How long a grant lets its key read the dataset: a pull that follows its
// SyncInfo (and one that resumes it after an interruption) goes on, but a key
// does not keep reading a tenant's dataset for ever on one operator's word.
inline constexpr std::chrono::hours grant_lifetime{24};

// What a PullDatasetRequest may hold: a dataset name the importer accepts, a
// tcp:// endpoint with a host and a port, a Z85 CURVE public key.
// invalid_argument naming the field otherwise.
status validate_pull(const std::string& dataset, const std::string& endpoint, const std::string& public_key);

// Whether <datasets_root>/<dataset> (a tenant's root) may be served: ok, or
// corruption naming the dataset and its damaged shard files
// (shards::check_dataset_dir: a missing manifest or shard, a shard of the
// wrong size). A dataset that does not exist is ok here (the sync server
// answers not_found for it).
status servable(const std::string& datasets_root, const std::string& dataset);

// The tenant a sync request names, as the ingest keys datasets: "" is
// `default`; anything else must be a valid token tenant (invalid_argument).
result<std::string> sync_tenant(const std::string& wire_tenant);

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

  // Lets the key `peer_public_z85` read `tenant`'s `dataset` for
  // grant_lifetime (the caller has checked that the requester may: the
  // dataset is of its token's tenant, or it is an admin), and audits it
  // ("dataset.grant", requested_by). Re-reads the keys first:
  // permission_denied when the key is not a trusted peer's (keys/peers/:
  // this deployment's own keys are shared, the client key by every CLI user),
  // invalid_argument for a malformed key.
  status grant(const std::string& peer_public_z85, const std::string& tenant, const std::string& dataset,
               const std::string& requested_by);

  // Whether `principal` (a ZAP user id) may read `tenant`'s `dataset` now
  // (the rules above). The sync server's authorize hook.
  bool may_read(const std::string& principal, const std::string& tenant, const std::string& dataset);

  // Starts a pull of dataset `dataset` of `source_tenant` ("" = the server's
  // default) from the sync server at `endpoint` (whose public key is given)
  // into `tenant`'s dataset of the same name here. invalid_argument
  // (validate_pull, a bad tenant, or our own endpoint), conflict while
  // another task for the dataset is queued or running (an import, say). The
  // task fails, replacing nothing, when what came does not match its
  // manifest.json (cdc::check_received_shards).
  result<task_info> pull(const std::string& tenant, const std::string& dataset, const std::string& endpoint,
                         const std::string& server_public_z85, const std::string& source_tenant,
                         const std::string& principal);

  const std::string& endpoint() const;

 private:
  sync_service() = default;
  status reload_keys();

  sync_service_options o_;
  std::unique_ptr<zmq::context_t> ctx_;  // declared first: destroyed last
  std::unique_ptr<wire::zap_handler> zap_;
  std::unique_ptr<cdc::sync_server> server_;
  std::mutex reload_mu_;  // one reload at a time (two SyncInfo calls at once)
  wire::allow_list admitted_;  // key -> principal, as last loaded; guarded by reload_mu_
  std::mutex grants_mu_;
  // (principal, tenant, dataset) -> when the grant ends; guarded by grants_mu_.
  std::map<std::tuple<std::string, std::string, std::string>, std::chrono::steady_clock::time_point> grants_;
};

}  // namespace loom::ingest
