// The data directory's layout and the endpoints file that `loom up` writes
// and every service and the CLI read. One place knows where things live:
//
//   <data>/endpoints.json        services' endpoints, pids, restarts, watcher pid, trainer count, import roots
//   <data>/imports/              the import area: ingest reads sources here and under the
//                                operator's import roots (`loom up --import-root DIR`)
//   <data>/loom.lock             flock: held by the watcher (and `loom up` while it starts one)
//   <data>/loom.db               the state store (SQLite) unless $LOOM_DATABASE_URL says otherwise
//   <data>/audit.db              the audit chain's own SQLite file (auditchain::store_url; a data dir
//                                from before it keeps the chain in loom.db)
//   <data>/keys/curve/<n>.pub    CURVE public keys (the ZAP allow-list)
//   <data>/keys/curve/<n>.key    CURVE secret keys (0600)
//   <data>/keys/peers/<n>.pub    other sites' keys trusted by this site's dataset sync server
//                                (and by the aggregator's delta server, as sites)
//   <data>/keys/diloco/<s>.pub   a diloco stage's site keys, made by this deployment's trainers:
//                                admitted by the aggregator's delta server only
//   <data>/keys/sites/<s>.<n>.pub  a cloud: enrolled edge site s's service n (written by the
//                                scheduler from its sites registry; every service admits them)
//   <data>/keys/cloud/<n>.pub    an edge site: the cloud's service keys (from its enrolment)
//   <data>/keys/cloud/token      an edge site: its bearer token for the cloud's services (0600)
//   <data>/cloud.json            an edge site: its name, the cloud's zone and endpoints
//   <data>/keys/token.key        HMAC key for tokens = the admin key (0600)
//   <data>/keys/epoch            token revocation epoch
//   <data>/keys/checkpoint.key   HMAC key signing checkpoint manifests (0600)
//   <data>/keys/audit/           audit keyring (KEKs, wrapped day keys) and the
//                                anchor signing key (libs/auditchain)
//   <data>/audit/anchors.log     the audit chain's external anchor (signed checkpoints)
//   <data>/admin.token           first admin token (0600)
//   <data>/spool/<service>/      audit spool of each service
//   <data>/logs/<service>.log    service stdout/stderr under `loom up`
//   <data>/jobs/<id>/...         job outputs: checkpoints signed with checkpoint.key
//   <data>/<service>/            each service's own state
// Everything is private to the owner: directories 0700, files 0600 (the
// launcher, the watcher and every service run under umask 077).
// Value types and stateless functions; thread-safe.
#pragma once

#include "libs/files/output.hpp"
#include "libs/layout/network.hpp"
#include "libs/status/status.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace loom::layout {

// The six services, in start order (audit first: others emit to it;
// scheduler second: others register with it; the console last: it is the
// others' gateway for browsers).
inline constexpr std::array<std::string_view, 6> service_names = {"audit",   "scheduler",  "ingest",
                                                                  "trainer", "aggregator", "console"};
bool is_service(std::string_view name);
// The binary that runs a service ("loom-trainer" needs the "serve" subcommand).
std::string binary_of(std::string_view service);

// A deployment runs one process of each service, except the trainer: `loom up
// --trainers N` runs N, named trainer, trainer-2 ... trainer-N. An extra
// instance is its kind's binary with its own ports and node id; it shares the
// kind's CURVE keypair.
inline constexpr int max_trainers = 64;
inline constexpr int max_scheduler_replicas = 5;
inline constexpr int max_audit_replicas = 5;
// The service kind of a process name: "trainer-3" -> "trainer", "audit" ->
// "audit"; "" when `name` is neither a kind nor <kind>-<K> with K >= 2.
std::string service_kind(std::string_view name);
// The name of instance `k` (1-based) of `kind`: k == 1 -> kind, else kind-k.
std::string instance_name(std::string_view kind, int k);

struct paths {
  std::string root;
  std::string endpoints() const { return root + "/endpoints.json"; }
  std::string curve_dir() const { return root + "/keys/curve"; }
  std::string peers_dir() const { return root + "/keys/peers"; }
  std::string diloco_sites_dir() const { return root + "/keys/diloco"; }
  std::string sites_dir() const { return root + "/keys/sites"; }
  std::string cloud_keys_dir() const { return root + "/keys/cloud"; }
  std::string cloud() const { return root + "/cloud.json"; }
  // A cloud split over hosts: the other host's services (`loom up --peer-endpoints`).
  std::string peers() const { return root + "/peers.json"; }
  std::string cloud_token() const { return root + "/keys/cloud/token"; }
  std::string token_key() const { return root + "/keys/token.key"; }
  std::string epoch() const { return root + "/keys/epoch"; }
  std::string checkpoint_key() const { return root + "/keys/checkpoint.key"; }
  std::string audit_keys() const { return root + "/keys/audit"; }
  // Key-encryption keys for data at rest (libs/atrest).
  std::string atrest_keys() const { return root + "/keys/atrest"; }
  std::string audit_anchors() const { return root + "/audit/anchors.log"; }
  // Archived segments of the audit chain (`loom audit archive`; libs/auditchain/archive.hpp).
  std::string audit_archive() const { return root + "/audit/archive"; }
  std::string admin_token() const { return root + "/admin.token"; }
  std::string spool(std::string_view service) const { return root + "/spool/" + std::string(service); }
  std::string log(std::string_view service) const { return root + "/logs/" + std::string(service) + ".log"; }
  std::string state(std::string_view service) const { return root + "/" + std::string(service); }
  std::string watcher_log() const { return root + "/logs/watcher.log"; }
  std::string imports() const { return root + "/imports"; }
  std::string lock() const { return root + "/loom.lock"; }
  std::string store() const { return root + "/loom.db"; }
  std::string audit_store() const { return root + "/audit.db"; }
  std::string jobs() const { return root + "/jobs"; }
};

// The first published checkpoint snapshot (a step-N directory holding a
// MANIFEST.json) found under `dir`, searched at most `max_depth` levels deep;
// "" when there is none. Keys that signed such snapshots must not be replaced.
std::string find_snapshot(const std::string& dir, int max_depth = 6);

// One service's addresses, as advertised (network.hpp: bind_of gives where
// to listen). `rpc` is its ROUTER; `pull` only for audit.
struct service_endpoint {
  std::string rpc;      // tcp://HOST:PORT (HOST = the network's advertise, 127.0.0.1 by default)
  std::string metrics;  // HOST:PORT
  std::string pull;     // audit only: PULL for AuditEvents
  std::int64_t pid = 0; // last known pid (written by the watcher)
  // Written by the watcher: how often it restarted this process since `loom
  // up` started it, how the last one ended ("exited with 1", "killed by
  // signal 9") and the last lines it printed before it did.
  // (Initialised, so {rpc, metrics, pull, pid} stays a complete initialiser under -Wextra.)
  std::uint64_t restarts = 0;
  std::string last_exit{};
  std::string last_error{};
  // The process's second listener, given a port by `loom up` so that it lies
  // in --ports: ingest's dataset sync server, the aggregator's delta server, a
  // trainer's collective inbox. "" = any free port on the listen address.
  std::string data{};
};

// What a deployment is (issue 15): a cloud runs every service; an edge site
// (`loom up --site NAME --cloud EP`) runs audit, ingest and its trainers, and
// reaches the cloud's scheduler and aggregator, whose entries in `services`
// are the cloud's (from cloud.json, pid 0: not this deployment's processes).
inline constexpr std::string_view role_cloud = "cloud";
inline constexpr std::string_view role_site = "site";
// The services an edge site does not run: it uses the cloud's (the
// console is the cloud's alone: a site's operators use the cloud's).
bool cloud_service(std::string_view service);

struct endpoints {
  int version = 1;
  std::string role = "cloud";  // "cloud" or "site"; "cloud" when the file has no "role"
  std::string zone = "local";  // an edge site's zone is its site name
  std::int64_t watcher_pid = 0;
  int trainers = 1;  // trainer processes (`loom up --trainers N`); 1 when the file has no "trainers"
  // Scheduler replicas (`loom up --scheduler-replicas N`, issue 30): one
  // leads at a time (a lease in the store), the others stand by; named
  // scheduler, scheduler-2 ... 1 when the file has no "scheduler_replicas".
  int scheduler_replicas = 1;
  // Replicas on separate hosts (`loom up --only scheduler --scheduler-replica
  // K`): the one replica this host runs, 1..scheduler_replicas; the others'
  // entries come from the peers (peers.json). 0 (the file has no
  // "scheduler_replica"): every replica runs here.
  int scheduler_replica = 0;
  // Audit replicas on this host (`loom up --audit-replicas N`, issue 30):
  // audit, audit-2 ...; one stores the chain under the lease, the others
  // stand by. 1 when the file has no "audit_replicas".
  int audit_replicas = 1;
  // Directories ingest may import from besides paths::imports() (`loom up
  // --import-root DIR`, absolute); empty when the file has no "import_roots".
  std::vector<std::string> import_roots;
  std::map<std::string, service_endpoint> services;  // by process name: "trainer", "trainer-2", ...
  // Where the services listen and what they advertise (`loom up --listen
  // --advertise --ports`); the default when the file has no "network".
  network net;
  // A cloud split over hosts (`loom up --only scheduler,audit`): the services
  // this host runs; empty = all of them. The others' entries in `services`
  // are another host's (`--peer-endpoints FILE`, pid 0).
  std::vector<std::string> only;

  const service_endpoint* find(std::string_view service) const;
  // The rpc endpoints of every process of kind `kind`, the kind's own first
  // ("scheduler", then "scheduler-2", ...): what a client of a replicated
  // service fails over across. Empty when none is known.
  std::vector<std::string> rpc_endpoints(std::string_view kind) const;
  // Every process of kind `kind` with an rpc endpoint, in the same order.
  std::vector<const service_endpoint*> instances(std::string_view kind) const;
  // How many processes of kind `kind` a deployment runs (trainers, replicas; else 1).
  int count_of(std::string_view kind) const;
  // What a client of process `name` calls: every replica's endpoint for a
  // replicated kind ("scheduler", "audit"), else the process's own (empty: unknown).
  std::vector<std::string> rpc_targets(std::string_view name) const;
  bool is_site() const { return role == role_site; }
  // Whether this deployment runs service kind `service` ("trainer") on this
  // host: false for a site's cloud services and for those `only` leaves out.
  bool runs_here(std::string_view service) const;
  // Whether process `name` ("scheduler-2") is one this host runs (process_names).
  bool runs_process(std::string_view name) const;
};

// How this deployment reaches service `service` (a kind: "scheduler"): the
// directory holding its CURVE public key <service>.pub, and the bearer token
// file for calls to it ("" = this deployment mints its own service tokens).
// An edge site reaches the cloud's scheduler and aggregator with
// keys/cloud/ and keys/cloud/token; everything else is its own (keys/curve).
struct service_reach {
  std::string key_dir;
  std::string token_file;
};
service_reach reach(const paths& p, const endpoints& e, std::string_view service);

// Every process this deployment runs, in start order: the services in
// service_names order with trainer-2 ... trainer-N right after "trainer"; an
// edge site leaves out the cloud's services (cloud_service), a split cloud
// those its `only` does not name.
std::vector<std::string> process_names(const endpoints& e);

// Whether `dir` may be an import root of the deployment at `p`: an absolute
// path of an existing directory that neither contains the data dir nor lies
// inside it (its keys and tokens must never be importable; paths::imports()
// is a root already). invalid_argument naming `dir` and the rule otherwise.
status check_import_root(const paths& p, const std::string& dir);

// The roots ingest reads from: paths::imports() first, then those of `e`
// that pass check_import_root (a root that fails is left out and named in
// `*skipped`, when given, with the reason).
std::vector<std::string> import_roots(const paths& p, const endpoints& e, std::vector<std::string>* skipped = nullptr);

// What a job's stages may read (data.text, data.sft, data.tokenizer,
// data.shards, model.init_from): the import roots above and the deployment's
// own job outputs, paths::jobs() (a stage starting from another's
// checkpoints). Never the rest of the data dir: keys, tokens, the store.
std::vector<std::string> job_read_roots(const paths& p, const endpoints& e);

// What a data dir holds for its services alone (issue 24 item 15): a top-level
// entry no command writes into or over, whatever its flags — keys/, the
// tokens, the store, endpoints.json and cloud.json, the lock, audit/, spool/,
// logs/, jobs/, datasets/, each service's own directory, and any hidden
// entry. The rest of the data dir (imports/ above all) is the owner's to
// write. A new entry of the layout above is added here.
bool private_entry(std::string_view name);

// Whether `dir` is a data dir (it holds keys/token.key, keys/curve/ or
// endpoints.json): outputs
// under it follow private_entry even when it is not the command's data dir.
bool looks_like_data_dir(const std::string& dir);

// files::check_output with the data dir rule: the output is neither a data
// dir itself nor inside a private entry of one — the command's own (`p`,
// whether it exists yet or not) or any data dir the output lies in.
// permission_denied naming the path, the entry and the rule; the other
// errors as files::check_output says. `rules.refuse`, when set, is asked too.
status check_output(const paths& p, const std::string& target, files::output_rules rules);

// Only the data dir rule of check_output, for a command with its own rules
// for existing outputs (`loom model export`). `option` names it in messages.
status check_not_private(const paths& p, const std::string& target, const std::string& option = "--out");

// not_found if absent; corruption if unparsable or "trainers" is outside 1..max_trainers.
// A split cloud's file (non-empty `only`) is read with the other host's
// services from peers.json beside it (pid 0; they replace what the file
// says of those services), unless `with_peers` is false; a damaged
// peers.json is corruption naming it.
result<endpoints> read_endpoints(const std::string& path, bool with_peers = true);
status write_endpoints(const std::string& path, const endpoints&);  // atomic

}  // namespace loom::layout
