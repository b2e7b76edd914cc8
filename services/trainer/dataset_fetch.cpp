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
#include <thread>

namespace loom::trainer {

std::string fetched_datasets(const runtime::service_env& env, const std::string& tenant) {
  return layout::tenant_datasets_root(env.paths.state("trainer") + "/datasets", tenant);
}

// Brings <data>/trainer/datasets/[.tenant-T/]<name> up to date with dataset
// `name` of the job's tenant at this deployment's ingest (at an edge site: the
// site's ingest, so a cloud job of tenant T reads the site's tenant-T
// dataset): SyncInfo says where its sync server listens, then a
// cdc::sync_client with the trainer's own key (admitted: it is in the
// deployment's curve dir, and the trainer key may read any tenant's dataset
// there) fetches only the chunks that changed — an unchanged dataset costs
// one manifest round trip — and accepts them only if they match their
// manifest.json (cdc::check_received_shards). The pull has a ZeroMQ context of
// its own so that `stop` (cancel, shutdown) ends it at once: shutting the
// context down fails the client's next socket call. Errors name the dataset
// and ingest.
status fetch_dataset(runtime::service_env& env, const std::string& tenant, const std::string& name,
                     const std::atomic<bool>& stop) {
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

  const std::string root = fetched_datasets(env, tenant);
  if (auto st = files::make_dirs(root); !st) return st;
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
  cdc::sync_client_options co;
  co.accept = [&](const cdc::staged_version& v) { return cdc::check_received_shards(v, name, &stop); };
  // Sealed at rest here under this node's keys (the sync moves plaintext over CURVE).
  co.seal = {atrest::sealing_keys(), [](const std::string& rel) { return shards::sealed_in_dataset(rel); }};
  cdc::sync_client client(pull_ctx, env.keys, info->public_key(), co);
  auto pulled = client.pull(info->endpoint(), tenant == layout::default_tenant ? "" : tenant, name, into);
  done = true;
  watch.join();
  if (!pulled && !existed) std::filesystem::remove_all(into, ec);  // e.g. a dataset ingest does not have
  ::close(lock_fd);
  if (!pulled) return fail(rpc + " (sync " + info->endpoint() + ")", pulled.err());
  std::fprintf(stderr,
               "trainer: fetched dataset %s from ingest sync %s into %s: %llu bytes received, %llu of %llu files "
               "updated, %llu removed, %.2f s\n",
               name.c_str(), info->endpoint().c_str(), into.c_str(),
               static_cast<unsigned long long>(pulled->chunk_bytes_fetched),
               static_cast<unsigned long long>(pulled->files_updated), static_cast<unsigned long long>(pulled->files),
               static_cast<unsigned long long>(pulled->files_removed), pulled->seconds);
  std::fflush(stderr);
  return ok_status();
}

}  // namespace loom::trainer
