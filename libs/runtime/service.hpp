// What a service hands to the runtime: its name, how to make its logic, and
// optional extra parts (e.g. the audit service's PULL receiver). service_main
// does the rest: keys, ZAP, the ROUTER gateway, authorization, metrics, audit
// emission, registration with the scheduler, supervision and clean shutdown.
// service_env is built on the main thread before anything starts and is
// read-only afterwards (its pointers stay valid until service_main returns).
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/runtime/service_logic.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <functional>
#include <memory>
#include <span>
#include <string>

namespace zmq {
class context_t;
}

namespace loom::metrics {
class service_metrics;
}
namespace loom::audit {
class emitter;
}
namespace loom::store {
class database;
struct migration;
}  // namespace loom::store

namespace loom::runtime {

class admission;   // admission.hpp
class leadership;  // leadership.hpp

// The ZAP domain of a ROUTER that also lets unknown keys in (as
// wire::unenrolled_principal, for EnrolSiteRequest only): the scheduler's.
inline constexpr std::string_view enrol_zap_domain = "loom-enrol";

struct service_env {
  std::string name;         // "scheduler"
  std::string node_id;      // "scheduler@<host>"
  std::string zone;         // "local"
  layout::paths paths;
  layout::endpoints eps;    // as read at start
  wire::curve_keypair keys; // this service's CURVE identity
  std::string rpc_endpoint; // the gateway's endpoint as advertised (tcp://HOST:PORT; layout/network.hpp)
  // The process's second listener as advertised (layout::service_endpoint::data):
  // "" = any free port on the listen address. data_bind() says where to bind it.
  std::string data_endpoint;
  zmq::context_t* ctx = nullptr;
  metrics::service_metrics* metrics = nullptr;
  audit::emitter* audit = nullptr;
  // The state store (services with migrations only): $LOOM_DATABASE_URL
  // (PostgreSQL), else <data dir>/loom.db (SQLite) or spec.store_url's. `db` is this process's
  // connection for the service actor; other threads open their own from the URL.
  std::string database_url;
  store::database* db = nullptr;
  // A short-lived operator token for this service's calls to other services.
  std::function<std::string()> service_token;
  // The bearer token for calls to `service` (a kind): service_token's, or at
  // an edge site the cloud's token for the cloud's services (layout::reach).
  std::function<std::string(std::string_view service)> token_for;
  // The keys this process admits (own and enrolled sites'); refresh() after
  // changing keys/sites/ makes it take effect at once.
  runtime::admission* admission = nullptr;
  // A service with spec.publishes_events: tells its event stream that
  // something under `topic` changed ("roster", "jobs", "sites", ...). Events
  // carry only the topic: a subscriber asks the service what changed, under
  // its own token. Thread-safe; a no-op when the service publishes nothing.
  std::function<void(std::string_view topic)> notify = [](std::string_view) {};
  // A replicated service (spec.replicated with more than one replica, or
  // --lease): whether this replica leads, its epoch, who does. Null otherwise.
  const runtime::leadership* leader = nullptr;
};

// Where a service's event stream listens: its second listener (the data
// endpoint in endpoints.json) on ZAP domain own_events_zap_domain, which
// admits this deployment's own keys only (never an edge site's).
inline constexpr std::string_view own_events_zap_domain = "loom-own";

// Where this process's second listener (dataset sync, delta server,
// collective inbox) binds: data_endpoint's port on the listen address, or a
// free port there. Report what it bound through advertised() below.
inline std::string data_bind(const service_env& env) {
  return env.data_endpoint.empty() ? "tcp://" + env.eps.net.listen + ":*" : layout::bind_of(env.eps.net, env.data_endpoint);
}
// What peers connect to for an endpoint this process bound (tcp://0.0.0.0:P
// becomes tcp://ADVERTISE:P).
inline std::string advertised(const service_env& env, const std::string& bound) {
  return layout::advertised(env.eps.net, bound);
}

// env.token_for(service), or service_token when unset (tests' envs).
inline std::string token_for(const service_env& env, std::string_view service) {
  if (env.token_for) return env.token_for(service);
  return env.service_token ? env.service_token() : std::string();
}

struct service_spec {
  std::string name;
  // Called at start and after every crash of the service actor.
  std::function<std::unique_ptr<service_logic>(service_env&)> make_logic;
  // The service's own tables; non-empty = the service uses the state store,
  // opened (retrying while unreachable) and migrated before anything starts.
  std::function<std::span<const store::migration>()> migrations;
  // Optional: the store's URL when neither --database nor $LOOM_DATABASE_URL
  // name one (default <data dir>/loom.db): the audit service's own audit.db.
  std::function<std::string(const std::string& data_dir)> store_url;
  // Optional, started before the gateway; the returned handle's destructor stops it.
  std::function<result<std::shared_ptr<void>>(service_env&)> start_extra;
  // The ROUTER also admits keys it does not know (enrol_zap_domain), which
  // the gateway lets send only token-free requests: where edge sites enrol.
  bool open_to_enrolment = false;
  // The service publishes change events (PUB on its data endpoint,
  // own_events_zap_domain) through env.notify: the scheduler's, which the
  // console's live pages follow.
  bool publishes_events = false;
  // The service may run as several replicas over one shared store, one
  // leading at a time (leadership.hpp): the scheduler. A standby answers every
  // request but Health and ReplicaStatus with NotLeader, runs no logic, and
  // every write of this process is fenced by the lease's epoch.
  bool replicated = false;
};

// Runs the service until SIGTERM/SIGINT (exit 0) or an unrecoverable failure
// (exit 1 start-up error, 70 supervisor escalation). Stops within 2 s.
int service_main(int argc, char** argv, const service_spec& spec);

}  // namespace loom::runtime
