#include "services/ingest/sync_service.hpp"

#include "libs/atrest/object.hpp"
#include "libs/audit/record.hpp"
#include "libs/auth/token.hpp"
#include "libs/cdc/received_shards.hpp"
#include "libs/cdc/sync_client.hpp"
#include "libs/cdc/sync_server.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/dataset_dirs.hpp"
#include "libs/layout/layout.hpp"
#include "libs/shards/check.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/wire/endpoint.hpp"
#include "services/ingest/importer/import_options.hpp"
#include "services/ingest/tasks.hpp"

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <thread>

namespace loom::ingest {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

// How often a running pull's task_info is refreshed and its stop flag looked
// at: GetTask is asked every 200 ms, and a cancel should land about as fast.
constexpr std::chrono::milliseconds pull_watch_interval{250};

double since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

// The ZAP principal of a trusted peer's key file <stem>.pub: never the name
// of one of the deployment's own keys ("trainer"), whatever the file is called.
constexpr std::string_view peer_prefix = "peer:";
// The deployment's own key that reads any tenant's dataset (a stage's data.dataset).
constexpr std::string_view trainer_principal = "trainer";

// Keys of `dir` (missing dir = none), each principal prefixed with `prefix`.
// A key in both lists keeps the first principal.
status merge_keys(const std::string& dir, wire::allow_list& into, std::string_view prefix = "") {
  auto keys = wire::load_allow_list(dir);
  if (!keys) return keys.code() == errc::not_found ? ok_status() : status(keys.err());
  for (auto& [key, principal] : *keys) into.emplace(key, std::string(prefix) + principal);
  return ok_status();
}

// What the receiving directory shows of a pull in flight (libs/cdc/README.md
// "Receiver's directory"): the client reports nothing until it returns, so
// the phase and the bytes of packs adopted so far are read off its files.
struct pull_progress {
  int phase = 0;  // 0 manifest, 1 chunks, 2 rebuild: only ever advances
  std::uint64_t pack_bytes = 0;
};
const char* phase_name(int p) { return p == 0 ? "manifest" : p == 1 ? "chunks" : "rebuild"; }

// Entries of `dir` (none when it is missing or vanishes meanwhile), and the
// bytes of those `count` accepts.
template <class Pred>
std::pair<std::size_t, std::uint64_t> scan(const std::string& dir, Pred count) {
  std::error_code ec;
  std::size_t n = 0;
  std::uint64_t bytes = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    ++n;
    std::error_code size_ec;
    if (count(it->path().filename().string())) bytes += it->file_size(size_ec);
  }
  return {n, bytes};
}

void peek(const std::string& into, pull_progress& p) {
  const std::string sync = into + "/.loom-sync";
  auto [packs, bytes] = scan(sync + "/chunks", [](const std::string& name) { return !name.ends_with(".idx"); });
  const auto none = [](const std::string&) { return false; };
  const std::size_t incoming = scan(sync + "/incoming", none).first;
  const std::size_t rebuilding = scan(sync + "/tmp", none).first;
  p.phase = std::max(p.phase, rebuilding ? 2 : packs + incoming ? 1 : 0);
  p.pack_bytes = std::max(p.pack_bytes, bytes);
}

struct pull_job {
  std::string tenant, source_tenant, dataset, endpoint, server_key, into;
  wire::curve_keypair mine;
  task_runner* runner = nullptr;  // the body runs on its thread, so it outlives the body
};

std::string stats_json(const cdc::sync_stats& s, const std::string& endpoint) {
  return nlohmann::json{{"endpoint", endpoint},
                        {"root", s.root},
                        {"files", s.files},
                        {"files_updated", s.files_updated},
                        {"files_removed", s.files_removed},
                        {"chunks_needed", s.chunks_needed},
                        {"chunks_reused", s.chunks_reused},
                        {"chunks_fetched", s.chunks_fetched},
                        {"chunks_refetched", s.chunks_refetched},
                        {"chunk_bytes_fetched", s.chunk_bytes_fetched},
                        {"packs", s.packs},
                        {"bulk_bytes_received", s.bulk_bytes_received},
                        {"wire_bytes_in", s.wire_bytes_in},
                        {"wire_bytes_out", s.wire_bytes_out},
                        {"seconds", s.seconds},
                        {"plan_seconds", s.plan_seconds},
                        {"fetch_seconds", s.fetch_seconds},
                        {"rebuild_seconds", s.rebuild_seconds}}
      .dump();
}

// The body of a "pull" task, on the runner thread. The pull gets a ZeroMQ
// context of its own so that a cancel can end it at once: shutting the
// context down fails the client's next socket call (unavailable).
status run_pull(task_context& ctx, const pull_job& p) {
  std::error_code ec;
  const bool existed = fs::exists(p.into, ec);
  std::string id;
  ctx.update([&](task_info& i) {
    id = i.id;
    i.phase = "manifest";
  });
  const auto t0 = clock::now();
  zmq::context_t zctx(1);
  cdc::sync_client_options co;
  // What came must match its manifest.json before it replaces anything here.
  co.accept = [&](const cdc::staged_version& v) { return cdc::check_received_shards(v, p.dataset, ctx.stop); };
  // Sealed at rest here under this node's keys (the sync moves plaintext over CURVE).
  co.seal = {atrest::sealing_keys(), [](const std::string& rel) { return shards::sealed_in_dataset(rel); }};
  cdc::sync_client client(zctx, p.mine, p.server_key, co);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watch([&] {
    pull_progress pr;
    std::unique_lock lock(mu);
    while (!done) {
      if (ctx.stop && ctx.stop->load()) {
        zctx.shutdown();
        return;
      }
      peek(p.into, pr);
      ctx.update([&](task_info& i) {
        i.phase = phase_name(pr.phase);
        i.bytes_sent = pr.pack_bytes;
        i.elapsed_s = since(t0);
      });
      cv.wait_for(lock, pull_watch_interval, [&] { return done; });
    }
  });
  auto pulled = client.pull(p.endpoint, p.source_tenant, p.dataset, p.into);
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  watch.join();

  const auto& s = pulled ? *pulled : client.last_stats();
  ctx.update([&](task_info& i) {
    i.bytes_sent = s.chunk_bytes_fetched;
    i.files = s.files_updated + s.files_removed;
    i.elapsed_s = since(t0);
    i.mb_per_s = s.seconds > 0 ? s.chunk_bytes_fetched / s.seconds / 1e6 : 0;
    i.report_json = stats_json(s, p.endpoint);
  });
  if (!pulled) {
    if (!existed) fs::remove_all(p.into, ec);  // an empty D would otherwise be served as a dataset
    if (ctx.stop && ctx.stop->load())
      return make_error(errc::unavailable, "pull of dataset " + p.dataset + " from " + p.endpoint + " stopped");
    std::string kept;
    if (pulled.code() == errc::corruption)  // a version refused (a chunk or its manifest.json): nothing replaced
      kept = existed ? " (nothing was replaced: the previous copy stands)" : " (no copy was made)";
    return make_error(pulled.code(), "pull of dataset " + p.dataset + " from " + p.endpoint + ": " +
                                         pulled.err().message + kept);
  }

  ctx.update([](task_info& i) { i.phase = "record"; });
  auto m = shards::read_manifest(p.into);
  if (!m)
    return make_error(m.code(), "pulled dataset " + p.dataset + " has no usable shard manifest: " + m.err().message);
  if (auto st = p.runner->record_dataset_dir(p.tenant, p.dataset, id); !st)
    return make_error(st.code(), "dataset " + p.dataset + " pulled but not recorded in the catalogue: " + st.err().message);
  std::uint64_t docs = 0;
  for (const auto& sh : m->shards) docs += sh.docs;
  ctx.update([&](task_info& i) {
    i.phase = "done";
    i.documents = docs;
    i.kept = docs;
    i.tokens = m->total_tokens();
    i.shards = static_cast<std::uint32_t>(m->shards.size());
    i.elapsed_s = since(t0);
  });
  return ok_status();
}

}  // namespace

status servable(const std::string& datasets_root, const std::string& dataset) {
  const std::string dir = datasets_root + "/" + dataset;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return ok_status();  // no such dataset: the server says so itself
  auto problems = shards::check_dataset_dir(dir);
  if (problems.empty()) return ok_status();
  return make_error(errc::corruption, "dataset " + dataset + " is damaged at its ingest: " +
                                          shards::describe(problems) + " (re-import it; `loom data verify " +
                                          dataset + "` checks every shard)");
}

result<std::string> sync_tenant(const std::string& wire_tenant) {
  if (wire_tenant.empty()) return std::string(layout::default_tenant);
  if (auto st = auth::validate_name("tenant", wire_tenant); !st) return st.err();
  return wire_tenant;
}

status validate_pull(const std::string& dataset, const std::string& endpoint, const std::string& public_key) {
  if (auto st = validate_dataset_name(dataset); !st) return st;
  if (!wire::valid_tcp_endpoint(endpoint, wire::endpoint_use::connect))
    return make_error(errc::invalid_argument,
                      "endpoint '" + endpoint + "': want tcp://HOST:PORT (a sync server's endpoint, from SyncInfo)");
  if (!wire::valid_z85_key(public_key))
    return make_error(errc::invalid_argument, "public_key: want the sync server's CURVE public key (40 Z85 characters)");
  return ok_status();
}

result<std::unique_ptr<sync_service>> sync_service::start(sync_service_options o) {
  if (!o.tasks) return make_error(errc::invalid_argument, "sync service: no task runner");
  if (!wire::valid_z85_key(o.keys.public_z85) || !wire::valid_z85_key(o.keys.secret_z85))
    return make_error(errc::invalid_argument, "sync service: the ingest service's CURVE keypair is not valid");
  if (o.bind.empty()) o.bind = "tcp://127.0.0.1:*";
  const layout::paths paths{o.data_dir};
  const std::string datasets = o.data_dir + "/datasets";
  // Packs are staged beside the data, not in $TMPDIR (often a small tmpfs);
  // what a killed process left there is of no use to this one.
  const std::string scratch = paths.state("ingest") + "/sync-scratch";
  std::error_code ec;
  fs::remove_all(scratch, ec);
  for (const auto& dir : {datasets, scratch})
    if (auto st = files::make_dirs(dir); !st) return st.err();

  std::unique_ptr<sync_service> s(new sync_service());
  s->o_ = std::move(o);
  s->ctx_ = std::make_unique<zmq::context_t>(1);
  wire::allow_list own;
  if (auto st = merge_keys(paths.curve_dir(), own); !st) return st.err();
  s->zap_ = std::make_unique<wire::zap_handler>(*s->ctx_, std::move(own), "loom");
  if (auto st = s->reload_keys(); !st)  // a bad peer key must not keep ingest down: SyncInfo reports it
    std::fprintf(stderr, "loom-ingest: sync: %s (trusting this deployment's keys only)\n", st.err().to_string().c_str());

  cdc::sync_server_options so;
  so.root = datasets;
  so.bind = s->o_.bind;
  so.scratch_dir = scratch;
  so.locate = [datasets](const std::string& tenant, const std::string& name) -> result<std::string> {
    auto t = sync_tenant(tenant);
    if (!t) return t.err();
    return layout::tenant_dataset_dir(datasets, *t, name);
  };
  sync_service* self = s.get();  // the server is destroyed first (~sync_service)
  so.authorize = [self](const std::string& principal, const std::string& tenant, const std::string& name) {
    auto t = sync_tenant(tenant);
    return t && self->may_read(principal, *t, name);
  };
  // A damaged dataset is not served: the puller learns which shard is wrong here.
  so.check = [datasets](const std::string& tenant, const std::string& name) -> status {
    auto t = sync_tenant(tenant);
    if (!t) return t.err();
    return servable(layout::tenant_datasets_root(datasets, *t), name);
  };
  auto server = cdc::sync_server::start(*s->ctx_, s->o_.keys, "loom", std::move(so));
  if (!server) return make_error(server.code(), "sync server on " + s->o_.bind + ": " + server.err().message);
  s->server_ = std::move(*server);
  std::fprintf(stderr, "loom-ingest: dataset sync on %s\n", s->server_->endpoint().c_str());
  return s;
}

sync_service::~sync_service() {
  server_.reset();
  zap_.reset();
  ctx_.reset();
}

const std::string& sync_service::endpoint() const { return server_->endpoint(); }

status sync_service::reload_keys() {
  std::lock_guard lock(reload_mu_);
  const layout::paths paths{o_.data_dir};
  wire::allow_list keys;
  if (auto st = merge_keys(paths.curve_dir(), keys); !st) return st;
  if (auto st = merge_keys(paths.peers_dir(), keys, peer_prefix); !st)
    return make_error(st.code(), "trusted peer keys in " + paths.peers_dir() + ": " + st.err().message);
  admitted_ = keys;
  zap_->set_allow_list(std::move(keys));
  return ok_status();
}

status sync_service::grant(const std::string& peer_public_z85, const std::string& tenant, const std::string& dataset,
                           const std::string& requested_by) {
  if (!wire::valid_z85_key(peer_public_z85))
    return make_error(errc::invalid_argument, "peer_public_key: want the pulling ingest's CURVE public key (40 Z85 "
                                              "characters)");
  if (auto st = validate_dataset_name(dataset); !st) return st;
  if (auto st = reload_keys(); !st) return st;
  std::string principal;
  {
    std::lock_guard lock(reload_mu_);
    auto it = admitted_.find(peer_public_z85);
    if (it == admitted_.end())
      return make_error(errc::permission_denied,
                        "key " + peer_public_z85.substr(0, 8) + "... is not admitted by this ingest's sync server (" +
                            layout::paths{o_.data_dir}.peers_dir() + " holds the trusted peers; `loom data sync` adds "
                            "the pulling ingest's key there)");
    principal = it->second;
  }
  // This deployment's own keys are shared (the client key by every CLI user):
  // a grant to one would open the dataset to all of them.
  if (!principal.starts_with(peer_prefix))
    return make_error(errc::permission_denied, "key " + principal + " is one of this deployment's own keys: a dataset "
                                               "is granted only to a trusted peer's (" +
                                                   layout::paths{o_.data_dir}.peers_dir() + ")");
  {
    std::lock_guard lock(grants_mu_);
    grants_[{principal, tenant, dataset}] = std::chrono::steady_clock::now() + grant_lifetime;
  }
  if (o_.audit) {
    auto r = audit::service_record(
        o_.node, o_.zone, "ingest", "dataset.grant", "",
        "key " + principal + " may read dataset " + dataset + " of tenant " + tenant,
        nlohmann::json{{"principal", principal},
                       {"tenant", tenant},
                       {"dataset", dataset},
                       {"hours", grant_lifetime.count()},
                       {"requested_by", requested_by}}
            .dump());
    o_.audit(std::move(r));
  }
  return ok_status();
}

bool sync_service::may_read(const std::string& principal, const std::string& tenant, const std::string& dataset) {
  if (principal == trainer_principal) return true;
  {
    std::lock_guard lock(grants_mu_);
    auto it = grants_.find({principal, tenant, dataset});
    if (it != grants_.end() && std::chrono::steady_clock::now() < it->second) return true;
    if (it != grants_.end()) grants_.erase(it);
  }
  // Refused: audited under the key (the sync socket carries no token).
  if (o_.audit) {
    const std::string who = tenant.empty() ? "default" : tenant;
    auto r = audit::service_record(o_.node, o_.zone, "ingest", "dataset.sync_refused", "",
                                   "key " + principal + " may not read dataset " + auth::printable(dataset) +
                                       " of tenant " + auth::printable(who) + " (no grant)",
                                   nlohmann::json{{"principal", principal}, {"tenant", who}, {"dataset", dataset}}
                                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    r.outcome = audit::decision::deny;
    r.peer = principal;
    r.tenant = who;
    o_.audit(std::move(r));
  }
  return false;
}

result<sync_endpoint> sync_service::info() {
  if (auto st = reload_keys(); !st) return st.err();
  return sync_endpoint{server_->endpoint(), o_.keys.public_z85};
}

result<task_info> sync_service::pull(const std::string& tenant, const std::string& dataset,
                                     const std::string& endpoint, const std::string& server_public_z85,
                                     const std::string& source_tenant, const std::string& principal) {
  if (auto st = validate_pull(dataset, endpoint, server_public_z85); !st) return st.err();
  if (auto st = auth::validate_name("tenant", tenant); !st) return st.err();
  if (!source_tenant.empty())
    if (auto st = auth::validate_name("source_tenant", source_tenant); !st) return st.err();
  if (endpoint == server_->endpoint() && server_public_z85 == o_.keys.public_z85)
    return make_error(errc::invalid_argument, "endpoint " + endpoint + " is this ingest's own sync server");
  const std::string root = o_.tasks->datasets_root(tenant);
  if (auto st = files::make_dirs(root); !st) return st.err();
  pull_job job{tenant,          source_tenant, dataset, endpoint, server_public_z85, root + "/" + dataset,
               o_.keys,         o_.tasks.get()};
  return o_.tasks->start("pull", tenant, dataset, endpoint, principal,
                         [job = std::move(job)](task_context& ctx) { return run_pull(ctx, job); });
}

}  // namespace loom::ingest
