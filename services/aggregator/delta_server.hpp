// delta_server: the aggregator's socket for sites (issue 15 §3-4). A ROUTER,
// CURVE server with a ZeroMQ context and ZAP handler of its own (domain
// "loom") that admits this deployment's keys (<data>/keys/curve) and the
// sites': other deployments' (keys/peers/<site>.pub), this deployment's
// diloco stages' (keys/diloco/<site>.pub) and enrolled edge sites' trainers
// (keys/sites/<site>.trainer.pub). A site key's principal is its directory
// and the file's stem ("peers/S", "diloco/S", "sites/S"), so the engine
// knows which site a key speaks for and what kind of site it is, and admits
// it only to the aggregations whose grant places it (engine.hpp). One thread
// owns the socket: it reads a request, calls the engine and answers, and
// every 100 ms closes the rounds whose deadline passed (and retires jobs
// whose grant expired) and re-reads the keys (a site placed in a key
// directory is admitted within a second, without a restart).
//
//   [type][message]             DeltaJoin, GlobalPull, RoundStatusQuery
//   [type][header][payload]     DeltaHeader + codec payload (raw)
//   answers: DeltaJoinReply, DeltaReply, GlobalPullReply, RoundStatusList,
//            [GlobalUpdateHeader][payload], or a loom.v1.Status (an error)
//
// Every message received is counted by its type (engine::frame_received):
// what crossed from the sites is visible as deltas and control messages.
//
// Frames of up to 1 GiB (a fragment's fp32 parameters); the peers are
// authenticated, and the cap still bounds what one can make us allocate.
// start/stop from one thread (the service's main); endpoint() from any.
#pragma once

#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace loom::aggregator {

class engine;

struct delta_server_options {
  std::string data_dir;
  wire::curve_keypair keys;  // the aggregator's identity
  // Where to listen; the endpoint actually bound is remembered in
  // <data>/aggregator/delta_endpoint and tried first on the next start, so
  // sites find a restarted aggregator where it was.
  std::string bind = "tcp://127.0.0.1:*";
  std::shared_ptr<engine> jobs;
  // `bind` is a fixed port `loom up` chose (--ports): no earlier endpoint is tried.
  bool fixed = false;
  // Whether edge site S still has an admitted key, as the service's gateway
  // sees it (runtime::admission::site_admitted): a revoked site's open
  // connection is refused here the moment the gateway refuses it, not only at
  // this socket's next key re-read. Unset: the re-read alone.
  std::function<bool(std::string_view site)> site_admitted{};
};

class delta_server {
 public:
  // Binds and starts the thread. unavailable when nothing can be bound;
  // invalid_argument for a bad keypair or an unreadable key directory.
  static result<std::unique_ptr<delta_server>> start(delta_server_options o);
  ~delta_server();  // stops the thread (≤ 100 ms), then the ZAP handler and context
  delta_server(const delta_server&) = delete;
  delta_server& operator=(const delta_server&) = delete;

  const std::string& endpoint() const;
  const std::string& public_key() const;

  struct impl;

 private:
  explicit delta_server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace loom::aggregator
