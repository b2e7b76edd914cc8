#include "services/trainer/dataset_fetch.hpp"

#include "libs/atrest/object.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/cdc/received_shards.hpp"
#include "libs/cdc/sync_client.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/dataset_dirs.hpp"
#include "libs/layout/layout.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/ingest.pb.h"

#include <zmq.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

namespace loom::trainer {

std::string fetched_datasets(const runtime::service_env& env, const std::string& tenant, const std::string& node) {
  const std::string root = layout::tenant_datasets_root(env.paths.state("trainer") + "/datasets", tenant);
  return node.empty() ? root : root + "/.node-" + node;
}

namespace {

// The dataset files placed on `node` by the manifest.json at `path`, with
// manifest.json itself: a node's share.
result<std::set<std::string>> share_of(const std::string& path, const std::string& node) {
  auto text = files::read_file(path);
  if (!text) return text.err();
  auto m = shards::parse_manifest(*text, "manifest.json");
  if (!m) return m.err();
  std::set<std::string> out = {std::string(shards::manifest_file_name)};
  for (const auto& s : m->shards)
    if (s.node == node) out.insert(s.name);
  for (const auto& t : m->media)
    if (t.node == node) out.insert(t.name);
  return out;
}

std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1 << 20));
  return buf;
}

}  // namespace

std::string fetch_figures::describe(const std::string& dataset, const std::string& node) const {
  std::string out = "dataset " + dataset + ": " + std::to_string(bytes_fetched) + " bytes received from ingest (" +
                    mib(bytes_fetched) + "; " + std::to_string(files_updated) + " files written, " +
                    std::to_string(files_removed) + " removed)";
  if (node.empty()) return out + "; every file of " + std::to_string(files) + " is here";
  return out + "; node " + node + " keeps its share, " + std::to_string(files_here) + " of " + std::to_string(files) +
         " files (manifest.json and the shards placed on it)";
}

// Brings <data>/trainer/datasets/[.tenant-T/][.node-N/]<name> up to date with
// dataset `name` of the job's tenant at this deployment's ingest (at an edge
// site: the site's ingest, so a cloud job of tenant T reads the site's
// tenant-T dataset): SyncInfo says where its sync server listens, then a
// cdc::sync_client with the trainer's own key (admitted: it is in the
// deployment's curve dir, and the trainer key may read any tenant's dataset
// there) fetches only the chunks that changed — an unchanged dataset costs
// one manifest round trip — and accepts them only if they match their
// manifest.json (cdc::check_received_shards). A node's share takes two pulls:
// manifest.json alone (which says where each shard is placed), then the
// files placed on the node; a placement that changed in between is seen in
// the second pull's manifest.json and the two are tried again. The pull has a
// ZeroMQ context of its own so that `stop` (cancel, shutdown) ends it at once:
// shutting the context down fails the client's next socket call. Errors name
// the dataset and ingest.
result<fetch_figures> fetch_dataset(runtime::service_env& env, const std::string& tenant, const std::string& name,
                                    const std::atomic<bool>& stop, const std::string& node) {
  auto eps = layout::read_endpoints(env.paths.endpoints());  // fresh: ingest may have moved
  const auto* ingest = eps ? eps->find("ingest") : env.eps.find("ingest");
  const std::string rpc = ingest ? ingest->rpc : "";
  auto fail = [&](const std::string& where, const error& e) {
    return make_error(e.code, "data.dataset " + name + ": cannot fetch it from the ingest service at " + where + ": " +
                                  e.message);
  };
  if (rpc.empty()) return fail("(none)", make_error(errc::unavailable, "no ingest endpoint in " + env.paths.endpoints()));
  auto key = wire::load_public_key(env.paths.curve_dir(), "ingest");
  if (!key) return fail(rpc, key.err());
  wire::client cli(*env.ctx, rpc, *key, env.keys, wire::client_options{std::chrono::milliseconds(2000), 1});
  auto info = wire::call_typed<loom::v1::SyncInfoReply>(cli, loom::v1::SyncInfoRequest{}, env.service_token());
  if (!info) return fail(rpc, info.err());

  const std::string root = fetched_datasets(env, tenant, node);
  if (auto st = files::make_dirs(root); !st) return st.err();
  // One pull into a directory at a time (two trainers sharing a data dir).
  const std::string lock_path = root + "/." + name + ".lock";
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) {
    if (lock_fd >= 0) ::close(lock_fd);
    return make_error(errc::internal, "data.dataset " + name + ": cannot lock " + lock_path);
  }
  const std::string into = root + "/" + name;
  std::error_code ec;
  const bool existed = std::filesystem::exists(into, ec);
  zmq::context_t pull_ctx(1);
  std::atomic<bool> done{false};
  std::thread watch([&] {
    while (!done && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) pull_ctx.shutdown();
  });
  fetch_figures fig;
  auto pull = [&](std::function<bool(const std::string&)> want, bool trim) -> result<cdc::sync_stats> {
    cdc::sync_client_options co;
    co.want = std::move(want);
    co.remove_extraneous = trim;
    // A manifest-only first pull is checked by the second, which trims.
    if (trim) co.accept = [&](const cdc::staged_version& v) -> status {
      if (auto st = cdc::check_received_shards(v, name, &stop); !st) return st;
      if (node.empty()) return {};
      // The version this pull publishes must not place on this node a file it left out.
      auto placed = share_of(v.files.at(std::string(shards::manifest_file_name)), node);
      if (!placed) return placed.err();
      for (const auto& rel : *placed)
        if (v.not_wanted.count(rel))
          return make_error(errc::conflict, "dataset " + name + " was placed anew while it was fetched (" + rel +
                                                " is now placed on node " + node + ")");
      return {};
    };
    // Sealed at rest here under this node's keys (the sync moves plaintext over CURVE).
    co.seal = {atrest::sealing_keys(), [](const std::string& rel) { return shards::sealed_in_dataset(rel); }};
    cdc::sync_client client(pull_ctx, env.keys, info->public_key(), co);
    auto r = client.pull(info->endpoint(), tenant == layout::default_tenant ? "" : tenant, name, into);
    if (r) {
      fig.files = r->files;
      fig.files_here = r->files - r->files_not_wanted;
      fig.files_updated += r->files_updated;
      fig.files_removed += r->files_removed;
      fig.bytes_fetched += r->chunk_bytes_fetched;
      fig.seconds += r->seconds;
    }
    return r;
  };
  result<cdc::sync_stats> pulled = make_error(errc::internal, "not pulled");
  if (node.empty()) {
    pulled = pull(nullptr, true);
  } else {
    const std::string manifest_name(shards::manifest_file_name);
    for (int attempt = 0; attempt < 3; ++attempt) {
      pulled = pull([&](const std::string& rel) { return rel == manifest_name; }, false);
      if (!pulled) break;
      auto share = share_of(into + "/" + manifest_name, node);
      if (!share) {
        pulled = share.err();
        break;
      }
      pulled = pull([&](const std::string& rel) { return share->count(rel) > 0; }, true);
      if (pulled || pulled.code() != errc::conflict) break;  // conflict: placed anew between the pulls
    }
  }
  done = true;
  watch.join();
  if (!pulled && !existed) std::filesystem::remove_all(into, ec);  // e.g. a dataset ingest does not have
  ::close(lock_fd);
  if (!pulled) return fail(rpc + " (sync " + info->endpoint() + ")", pulled.err());
  std::fprintf(stderr, "trainer: fetched dataset %s from ingest sync %s into %s in %.2f s: %s\n", name.c_str(),
               info->endpoint().c_str(), into.c_str(), fig.seconds, fig.describe(name, node).c_str());
  std::fflush(stderr);
  return fig;
}

}  // namespace loom::trainer
