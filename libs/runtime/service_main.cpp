// service_main: wires one EdgeLoom service process together. Read top to
// bottom: options -> keys -> ZAP -> ROUTER -> metrics -> audit emitter ->
// supervised service actor -> registration -> gateway loop -> shutdown.
#include "libs/atrest/object.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/audit/emitter.hpp"
#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/metrics/metrics.hpp"
#include "libs/runtime/actor_host.hpp"
#include "libs/runtime/admission.hpp"
#include "libs/runtime/builtin_logic.hpp"
#include "libs/runtime/gateway.hpp"
#include "libs/runtime/key_follower.hpp"
#include "libs/runtime/leadership.hpp"
#include "libs/runtime/replica_logic.hpp"
#include "libs/runtime/registrar.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/pubsub.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/server.hpp"

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace loom::runtime {
namespace {

struct options {
  std::string data_dir, zone, node_id, bind, metrics, database, data;
  bool replica = false;  // --replica: lead only under the store's lease (spec.replicated)
};

// How long a service waits for an unreachable database at start before it
// gives up (exit 1; the launcher restarts it, so it keeps trying).
// $LOOM_DATABASE_WAIT_S overrides it.
int database_deadline_s() {
  const char* v = std::getenv("LOOM_DATABASE_WAIT_S");
  int s = v ? std::atoi(v) : 0;
  return s > 0 ? s : 30;
}

std::atomic<gateway*> g_gateway{nullptr};

void on_signal(int) {
  if (auto* g = g_gateway.load()) g->request_stop();
}

int usage(const std::string& name, const std::string& why) {
  std::fprintf(stderr,
               "%s%susage: loom-%s [--data-dir D] [--zone Z] [--node-id N] [--bind tcp://HOST:PORT] "
               "[--metrics HOST:PORT] [--data tcp://HOST:PORT] [--database URL] [--replica]\n",
               why.c_str(), why.empty() ? "" : "\n", name.c_str());
  return 2;
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf[0] ? buf : "localhost";
}

// Mints and caches this service's own operator token (thread-safe).
class token_source {
 public:
  token_source(std::string principal, std::string key, std::string epoch_file)
      : principal_(std::move(principal)), key_(std::move(key)), epoch_file_(std::move(epoch_file)) {}
  std::string get() {
    std::lock_guard lock(mu_);
    auto now = std::chrono::duration_cast<std::chrono::seconds>(loom::wall_now().time_since_epoch())
                   .count();
    auto epoch = auth::read_epoch(epoch_file_);
    std::uint64_t e = epoch ? *epoch : 0;
    if (token_.empty() || now > minted_ + 1800 || e != epoch_) {
      auth::claims c{principal_, auth::role::operator_, {"*"}, now + 3600, e, now};
      auto t = auth::issue_token(c, key_);
      token_ = t ? *t : "";
      minted_ = now;
      epoch_ = e;
    }
    return token_;
  }

 private:
  std::mutex mu_;
  std::string principal_, key_, epoch_file_, token_;
  std::int64_t minted_ = 0;
  std::uint64_t epoch_ = 0;
};

}  // namespace

int service_main(int argc, char** argv, const service_spec& spec) {
  ::umask(077);  // the store, logs, spools and job outputs are the owner's alone (keys are 0600 anyway)
  // 1. Options. Defaults come from <data>/endpoints.json written by `loom up`.
  options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    bool ok = true;
    if (a == "--data-dir") ok = value(opt.data_dir);
    else if (a == "--zone") ok = value(opt.zone);
    else if (a == "--node-id") ok = value(opt.node_id);
    else if (a == "--bind") ok = value(opt.bind);
    else if (a == "--metrics") ok = value(opt.metrics);
    else if (a == "--data") ok = value(opt.data);
    else if (a == "--database") ok = value(opt.database);
    else if (a == "--replica" && spec.replicated) opt.replica = true;
    else if (a == "--help" || a == "-h") return usage(spec.name, ""), 0;
    else return usage(spec.name, "unknown option " + a);
    if (!ok) return usage(spec.name, "option " + a + " needs a value");
  }
  service_env env;
  env.name = spec.name;
  env.paths.root = files::resolve_data_dir(opt.data_dir);
  if (auto eps = layout::read_endpoints(env.paths.endpoints())) env.eps = *eps;
  const auto* mine = env.eps.find(spec.name);
  env.zone = !opt.zone.empty() ? opt.zone : env.eps.zone;
  env.node_id = !opt.node_id.empty() ? opt.node_id : spec.name + "@" + host_name();
  // endpoints.json holds advertised endpoints: listen where they say, on the
  // listen address (layout/network.hpp). An explicit --bind/--metrics is taken as is.
  const auto& net = env.eps.net;
  std::string bind = !opt.bind.empty() ? opt.bind
                     : mine && !mine->rpc.empty() ? layout::bind_of(net, mine->rpc)
                                                  : "tcp://" + net.listen + ":*";
  std::string metrics_bind = !opt.metrics.empty()                    ? opt.metrics
                             : mine && !mine->metrics.empty() ? layout::bind_of(net, mine->metrics)
                                                              : net.listen + ":0";
  env.data_endpoint = !opt.data.empty() ? opt.data : mine ? mine->data : std::string();

  // 2. Keys: our CURVE identity, the allow-list, the token key.
  auto keys = wire::load_keypair(env.paths.curve_dir(), spec.name);
  if (!keys) {
    std::fprintf(stderr, "loom-%s: %s\nhint: run `loom up` (or `loom keys init`) to create keys in %s\n",
                 spec.name.c_str(), keys.err().to_string().c_str(), env.paths.root.c_str());
    return 1;
  }
  env.keys = *keys;
  auto allow = admitted_keys(env.paths);  // own keys and enrolled sites' (admission.hpp)
  auto token_key = auth::load_token_key(env.paths.token_key());
  if (!allow || !token_key) {
    std::fprintf(stderr, "loom-%s: %s\n", spec.name.c_str(),
                 (!allow ? allow.err() : token_key.err()).to_string().c_str());
    return 1;
  }
  token_source tokens("svc:" + spec.name, *token_key, env.paths.epoch());
  env.service_token = [&tokens] { return tokens.get(); };
  env.token_for = [&env, &tokens](std::string_view service) {
    const auto r = layout::reach(env.paths, env.eps, service);
    if (r.token_file.empty()) return tokens.get();
    auto t = files::read_file(r.token_file);  // read each time: enrolling again renews it
    std::string out = t ? *t : std::string();
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  };

  // Signals: handled by waking the gateway loop; SIGPIPE never kills us.
  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);

  // 3. ZeroMQ: the ZAP handler is bound before any CURVE socket exists.
  zmq::context_t ctx(1);
  env.ctx = &ctx;
  auto zap = std::make_unique<wire::zap_handler>(ctx, *allow, "loom");
  if (spec.open_to_enrolment) zap->admit_unknown_on(std::string(enrol_zap_domain));
  auto admitted = std::make_unique<admission>(env.paths, *zap);
  env.admission = admitted.get();
  std::unique_ptr<wire::router_server> server;
  try {
    server = std::make_unique<wire::router_server>(
        ctx, env.keys, spec.open_to_enrolment ? std::string(enrol_zap_domain) : std::string("loom"), bind);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-%s: cannot listen on %s: %s\n", spec.name.c_str(), bind.c_str(), e.what());
    return 1;
  }
  env.rpc_endpoint = layout::advertised(net, server->endpoint());
  // The change events (service.hpp: notify): one PUB socket, guarded so any thread may notify.
  std::unique_ptr<wire::publisher> events;
  std::mutex events_mu;
  if (spec.publishes_events) {
    zap->admit_own_only_on(std::string(own_events_zap_domain));
    try {
      events = std::make_unique<wire::publisher>(ctx, env.keys, std::string(own_events_zap_domain), data_bind(env),
                                                 env.node_id);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "loom-%s: cannot publish events on %s: %s\n", spec.name.c_str(), data_bind(env).c_str(),
                   e.what());
      return 1;
    }
    env.notify = [&events, &events_mu](std::string_view topic) {
      std::lock_guard lk(events_mu);
      events->publish(topic, "", "");
    };
  }

  // 4. Metrics.
  auto metrics = metrics::service_metrics::start(spec.name, metrics_bind);
  if (!metrics) {
    std::fprintf(stderr, "loom-%s: %s\n", spec.name.c_str(), metrics.err().to_string().c_str());
    return 1;
  }
  env.metrics = metrics->get();

  // 5. Audit emission through the durable spool.
  audit::emitter_options eo;
  eo.source = spec.name + "@" + env.node_id;
  // One spool per process (spool.hpp: flock): an extra instance
  // (--node-id trainer-2@host) spools under spool/trainer-2.
  const std::string instance = env.node_id.substr(0, env.node_id.find('@'));
  eo.spool_dir = env.paths.spool(layout::service_kind(instance) == spec.name ? instance : spec.name);
  if (const auto* a = env.eps.find("audit")) {
    eo.push_endpoint = a->pull;
    eo.rpc_endpoint = a->rpc;
  }
  if (const auto audits = env.eps.instances("audit"); audits.size() > 1)  // replicas: the leader's PULL
    for (const auto* a : audits) eo.replicas.emplace_back(a->rpc, a->pull);
  if (auto k = wire::load_public_key(env.paths.curve_dir(), "audit")) eo.server_public = *k;
  eo.mine = env.keys;
  eo.token = env.service_token;
  if (eo.push_endpoint.empty() || eo.server_public.empty()) {
    std::fprintf(stderr, "loom-%s: no audit endpoint/key in %s: events stay in the spool\n", spec.name.c_str(),
                 env.paths.root.c_str());
    eo.push_endpoint = eo.rpc_endpoint = "tcp://127.0.0.1:1";  // unreachable: everything stays spooled
    if (eo.server_public.empty()) eo.server_public = env.keys.public_z85;
  }
  auto emitter = audit::emitter::start(ctx, eo);
  if (!emitter) {
    std::fprintf(stderr, "loom-%s: %s\n", spec.name.c_str(), emitter.err().to_string().c_str());
    return 1;
  }
  env.audit = emitter->get();

  // 5b. Keys at rest (libs/atrest): every service reads what is sealed under
  // this data directory; the trainer seals its snapshots and stage datasets
  // with them. Each rotation, scheduled (the KEK's age) or not, is audited —
  // while the emitter lives (the guard below goes first).
  struct rotation_sink {
    std::mutex mu;
    audit::emitter* em = nullptr;
  };
  auto sink = std::make_shared<rotation_sink>();
  sink->em = env.audit;
  struct sink_guard {
    std::shared_ptr<rotation_sink> s;
    ~sink_guard() {
      std::lock_guard lock(s->mu);
      s->em = nullptr;
    }
  } rotation_guard{sink};
  auto at_rest = atrest::open_process_keys_from_env(
      env.paths.atrest_keys(), [](const char* n) { return std::getenv(n); }, loom::wall_now(),
      [sink, node = env.node_id, zone = env.zone, svc = spec.name](std::uint32_t version, bool scheduled) {
        std::fprintf(stderr, "loom-%s: at-rest key-encryption key rotated to version %u (%s)\n", svc.c_str(), version,
                     scheduled ? "scheduled: the previous one reached its rotation age" : "asked for");
        std::lock_guard lock(sink->mu);
        if (sink->em)
          sink->em->emit(audit::service_record(node, zone, svc, "keys.atrest.rotate", "",
                                               "at-rest KEK version " + std::to_string(version),
                                               nlohmann::json{{"version", version}, {"scheduled", scheduled}}.dump()));
      });
  if (!at_rest) {
    std::fprintf(stderr, "loom-%s: %s\n", spec.name.c_str(), at_rest.err().to_string().c_str());
    return 1;
  }
  // Read at each scrape: the spool's unconfirmed records (LoomAuditBacklog)
  // and the data directory's disk (LoomDiskLow). Cleared before the emitter goes.
  env.metrics->on_scrape([em = env.audit, root = env.paths.root](metrics::service_metrics& m) {
    m.set("audit_spool_depth", {}, static_cast<double>(em->pending()));
    metrics::set_disk_gauges(m, root);
  });

  // 6. The state store: open (retrying while unreachable), then migrate.
  std::unique_ptr<store::database> db;
  if (spec.migrations) {
    const char* env_url = std::getenv("LOOM_DATABASE_URL");
    env.database_url = !opt.database.empty() ? opt.database
                       : env_url && *env_url ? std::string(env_url)
                       : spec.store_url                ? spec.store_url(env.paths.root)
                                                       : env.paths.store();
    auto opened = store::database::open_with_retry(
        env.database_url, std::chrono::steady_clock::now() + std::chrono::seconds(database_deadline_s()));
    if (!opened) {
      std::fprintf(stderr, "loom-%s: state store: %s\n", spec.name.c_str(), opened.err().to_string().c_str());
      return 1;
    }
    db = std::move(*opened);
    if (auto st = store::migrate(*db, spec.migrations()); !st) {
      std::fprintf(stderr, "loom-%s: state store %s: %s\n", spec.name.c_str(), db->masked_url().c_str(),
                   st.err().to_string().c_str());
      return 1;
    }
    env.db = db.get();
  }

  // 7. Leadership (a replica), the service-specific parts, then the
  // supervised service actor. The lease comes first: those parts may ask
  // whether this process leads (the audit receiver stores only then).
  // A replica (several in endpoints.json, or --replica) leads only under the
  // store's lease; standing by it runs no logic (replica_logic.hpp).
  std::unique_ptr<leadership> leader;
  std::atomic<actor_host*> host_ptr{nullptr};
  if (spec.replicated && db &&
      (opt.replica || env.eps.count_of(spec.name) > 1)) {
    leadership_options lo;
    lo.service = spec.name;
    lo.node_id = env.node_id;
    lo.endpoint = env.rpc_endpoint;
    lo.zone = env.zone;
    lo.database_url = env.database_url;
    auto l = leadership::start(lease_timing_from_env(lo), [&host_ptr](bool, std::int64_t) {
      if (auto* h = host_ptr.load()) h->post(replica_sync_type, "", call_context{}, [](handled) {});
    });
    if (!l) {
      std::fprintf(stderr, "loom-%s: lease: %s\n", spec.name.c_str(), l.err().to_string().c_str());
      return 1;
    }
    leader = std::move(*l);
    env.leader = leader.get();
    std::fprintf(stderr, "loom-%s: replica %s: leads only under the lease (ttl %lld ms)\n", spec.name.c_str(),
                 env.node_id.c_str(), static_cast<long long>(leader->options().ttl.count()));
  }
  std::shared_ptr<void> extra;
  if (spec.start_extra) {
    auto x = spec.start_extra(env);
    if (!x) {
      std::fprintf(stderr, "loom-%s: %s\n", spec.name.c_str(), x.err().to_string().c_str());
      return 1;
    }
    extra = *x;
  }
  actor_host host([&env, &spec]() -> std::unique_ptr<service_logic> {
    auto make = [&env, &spec]() -> std::unique_ptr<service_logic> {
      return std::make_unique<builtin_logic>(env.name, spec.make_logic(env));
    };
    if (env.leader) return std::make_unique<replica_logic>(*env.leader, env.name, env.node_id, make);
    return make();
  }, actor_host::options{});
  host_ptr = &host;
  host.set_on_restart([&env](std::uint64_t n, const std::string& why) {
    env.metrics->count_restart();
    std::fprintf(stderr, "loom-%s: service actor restarted (#%llu): %s\n", env.name.c_str(),
                 static_cast<unsigned long long>(n), why.c_str());
  });

  // 8. Registration (and, away from the scheduler, its site keys), then serve until a signal.
  std::unique_ptr<key_follower> follower;
  if (key_follower::follows(env)) follower = std::make_unique<key_follower>(env);
  registrar reg(env);
  gateway gw(env, *server, host, gateway_options{*token_key, env.paths.epoch()});
  g_gateway = &gw;
  std::fprintf(stderr, "loom-%s: serving on %s (metrics http://%s/metrics, pid %d)\n", spec.name.c_str(),
               env.rpc_endpoint.c_str(), env.metrics->endpoint().c_str(), static_cast<int>(::getpid()));
  int rc = gw.run();
  g_gateway = nullptr;

  // 9. Shutdown: stop every thread in parallel; the spool keeps what audit has not confirmed.
  auto t0 = std::chrono::steady_clock::now();
  std::thread stop_reg([&] {
    reg.stop();
    follower.reset();
  });
  host_ptr = nullptr;
  host.stop();
  if (leader) extra.reset();  // a replica's parts write under the lease too (the audit receiver's last checkpoint)
  leader.reset();  // after the logic's last write: hands the lease over at once
  stop_reg.join();
  extra.reset();
  db.reset();
  env.metrics->clear_scrape_hooks();
  emitter->reset();
  server.reset();
  admitted.reset();
  zap.reset();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "loom-%s: stopped in %lld ms\n", spec.name.c_str(), static_cast<long long>(ms));
  return rc;
}

}  // namespace loom::runtime
