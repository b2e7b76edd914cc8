// The scheduler's InspectCheckpoint call over the wire, in process: a fake
// aggregator (a CURVE ROUTER admitting the scheduler's key only) answers; the
// endpoint comes from endpoints.json, the key from keys/curve/aggregator.pub.
// Facts come through field by field, the aggregator's errors keep their code
// and name its endpoint, and a reply describing another step is corruption.
#include "services/scheduler/remote_checkpoint.hpp"

#include "libs/files/temp_dir.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/envelope.hpp"
#include "libs/wire/server.hpp"
#include "loom/v1/aggregator.pb.h"

#include <doctest/doctest.h>
#include <zmq.hpp>

#include <atomic>
#include <thread>

using namespace loom;
using namespace loom::scheduler;

namespace {

// A fake aggregator on loopback: answers InspectCheckpoint by the path's name.
struct fake_aggregator {
  zmq::context_t ctx;
  wire::curve_keypair server = wire::generate_keypair();
  wire::curve_keypair scheduler = wire::generate_keypair();
  std::unique_ptr<wire::zap_handler> zap =
      std::make_unique<wire::zap_handler>(ctx, wire::allow_list{{scheduler.public_z85, "scheduler"}}, "loom");
  wire::router_server srv{ctx, server, "loom", "tcp://127.0.0.1:*"};
  std::atomic<bool> stop{false};
  std::string last_token, last_peer;
  std::thread loop{[this] {
    while (!stop)
      if (auto in = srv.poll(std::chrono::milliseconds(20)); in && in->req) srv.send(in->identity, answer(*in));
  }};
  ~fake_aggregator() {
    stop = true;
    loop.join();
  }
  wire::reply answer(const wire::router_server::incoming& in) {
    last_token = in.req->token;
    last_peer = in.peer_principal;
    loom::v1::InspectCheckpointRequest q;
    if (in.req->type != "loom.v1.InspectCheckpointRequest" || !q.ParseFromString(in.req->body))
      return wire::error_reply(in.request_id, errc::invalid_argument, "not an InspectCheckpointRequest");
    if (q.checkpoint().find("/bad/") != std::string::npos)
      return wire::error_reply(in.request_id, errc::corruption, "checkpoint " + q.checkpoint() + " does not verify");
    loom::v1::InspectCheckpointReply rep;
    rep.set_step(q.checkpoint().ends_with("step-000008") ? 9 : 7);
    rep.set_manifest_sha256("m-sha");
    rep.set_params_sha256("p-sha");
    (*rep.mutable_eval())["eval_after_kl"] = 0.25;
    return {in.request_id, "loom.v1.InspectCheckpointReply", rep.SerializeAsString(), errc::ok, "", {}};
  }
};

}  // namespace

TEST_CASE("the scheduler asks the aggregator endpoints.json names, over its key, and keeps the aggregator's answer and errors") {
  files::temp_dir dir("loom-remote-wire");
  fake_aggregator agg;
  runtime::service_env env;
  env.paths = layout::paths{dir.path()};
  env.ctx = &agg.ctx;
  env.keys = agg.scheduler;
  env.service_token = [] { return std::string("svc-token"); };
  REQUIRE(wire::save_keypair(env.paths.curve_dir(), "aggregator", agg.server).ok());
  layout::endpoints eps;
  eps.only = {"scheduler", "audit"};
  eps.services["aggregator"].rpc = agg.srv.endpoint();
  REQUIRE(layout::write_endpoints(env.paths.endpoints(), eps).ok());
  env.eps.services["aggregator"].rpc = "tcp://127.0.0.1:1";  // stale: endpoints.json is read at each call

  const std::string on_b = dir.path() + "/jobs/j/s/checkpoints/step-000007";  // not on this disk
  auto f = split_cloud_inspector(env)(on_b);
  REQUIRE_MESSAGE(f.ok(), f.err().message);
  CHECK(f->step == 7);
  CHECK(f->manifest_sha256 == "m-sha");
  CHECK(f->params_sha256 == "p-sha");
  CHECK(f->eval == std::map<std::string, double>{{"eval_after_kl", 0.25}});
  CHECK(agg.last_token == "svc-token");
  CHECK(agg.last_peer == "scheduler");
  CHECK(split_cloud_check(env)(on_b).ok());

  auto bad = aggregator_inspector(env)(dir.path() + "/jobs/bad/s/checkpoints/step-000007");
  CHECK(bad.code() == errc::corruption);
  CHECK(bad.err().message.find("the aggregator at " + agg.srv.endpoint() + ": checkpoint ") == 0);
  auto other_step = aggregator_inspector(env)(dir.path() + "/jobs/j/s/checkpoints/step-000008");
  CHECK(other_step.code() == errc::corruption);
  CHECK(other_step.err().message.find("describes step 9") != std::string::npos);
}
