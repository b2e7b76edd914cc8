// site_sync against an aggregator in this process (services/aggregator's
// engine and delta server, one site, quorum 1): training steps go at their
// own pace whether or not the aggregator answers, and the deltas owed while
// it was gone reach it once it is back. Steps are simulated (a fixed move of
// the parameters and a 10 ms sleep); only the sync is real.
#include "services/trainer/diloco/site_sync.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/layout/layout.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/delta_server.hpp"
#include "services/aggregator/engine.hpp"

#include <doctest/doctest.h>
#include <zmq.hpp>

#include <cmath>
#include <cstring>
#include <thread>

using namespace loom;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t n = 4096;     // values
constexpr auto step_time = 10ms;    // one simulated inner step

struct bench {
  files::temp_dir dir;
  layout::paths paths{dir.path()};
  wire::curve_keypair agg = wire::generate_keypair(), site = wire::generate_keypair();
  std::shared_ptr<aggregator::engine> jobs;
  std::unique_ptr<aggregator::delta_server> server;
  std::string endpoint;

  bench() {
    REQUIRE(wire::save_keypair(paths.curve_dir(), "aggregator", agg).ok());
    REQUIRE(files::make_dirs(paths.diloco_sites_dir()).ok());
    REQUIRE(files::write_atomic(paths.diloco_sites_dir() + "/site-0.pub", site.public_z85 + "\n").ok());
    jobs = std::make_shared<aggregator::engine>(aggregator::engine_options{dir.path(), "agg", "", {}, nullptr});
    aggregator::aggregation_spec s;
    s.job = "j";
    s.flat_size = n;
    s.fragments = 2;
    s.sync_every = 4;
    s.codec = codec::codec_id::fp32;
    s.rounds.quorum_sites = 1;
    s.init_seed = 7;
    const diloco::grant_terms terms{"j", "pretrain", "default", dir.path() + "/jobs/j/pretrain", {"site-0"}, false,
                                    INT64_MAX};
    REQUIRE(jobs->start(s, terms, std::chrono::steady_clock::now().time_since_epoch()).ok());
    up();
  }
  void up() {  // binds where it was before (delta_endpoint), as a restarted aggregator does
    auto made = aggregator::delta_server::start({dir.path(), agg, "tcp://127.0.0.1:*", jobs});
    REQUIRE(made.ok());
    server = std::move(*made);
    if (endpoint.empty()) endpoint = server->endpoint();
    REQUIRE(server->endpoint() == endpoint);
  }
  std::unique_ptr<trainer::site_sync> sync() {
    trainer::site_sync_options o;
    o.job = "j";
    o.site = "site-0";
    o.keys = site;
    o.locate = [this]() -> result<trainer::aggregator_address> {
      return trainer::aggregator_address{endpoint, agg.public_z85};
    };
    o.timeout = 300ms;
    o.patience = 50ms;  // a due point's wait for the last round ends this soon after the cut
    o.final_wait_s = 20;
    return trainer::site_sync::make(std::move(o)).value();
  }
};

// One simulated inner step: every value moves by the same small amount.
void inner_step(std::vector<float>& x, std::uint64_t t) {
  for (std::size_t i = 0; i < x.size(); ++i) x[i] += 1e-3f * std::sin(0.01f * float(i) + float(t));
  std::this_thread::sleep_for(step_time);
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

TEST_CASE("a site trains at its own pace while the aggregator is gone and sends what it owes once it is back") {
  bench b;
  auto s = b.sync();
  std::vector<float> x(n);
  REQUIRE(s->start(x).ok());
  CHECK(std::abs(x[0]) > 0);  // the seeded global parameters
  std::uint64_t t = 0;
  auto steps = [&](int k) {
    for (int i = 0; i < k; ++i) {
      inner_step(x, ++t);
      REQUIRE(s->after_step(t, x, 100).ok());
    }
  };
  // Up: rounds close (quorum 1) and their versions are merged at later steps.
  steps(16);
  const auto before = s->stats();
  CHECK(before.syncs >= 3);
  CHECK(s->version(0) >= 2);
  CHECK(before.unreachable == 0);
  MESSAGE("int8 relative error on the last delta: " << before.compression_error);
  CHECK(before.compression_error > 0);
  CHECK(before.compression_error < 0.05);  // int8 blockwise on a smooth delta

  // Gone: nothing answers at its endpoint. 40 steps take about 40 step times
  // (the old site_sync spent the request timeout, 300 ms, in a step per try).
  b.server.reset();
  const std::uint64_t cut_version = s->version(0) + s->version(1);
  const auto t0 = std::chrono::steady_clock::now();
  steps(40);
  const double took = seconds(std::chrono::steady_clock::now() - t0);
  MESSAGE("40 steps of 10 ms with no aggregator: " << took << " s");
  CHECK(took < 40 * 0.010 + 0.35);
  const auto gone = s->stats();
  CHECK(gone.unreachable >= 1);
  CHECK(gone.deferred >= 5);  // due every 2 steps per fragment pair, each still out
  CHECK(gone.stall_s < 0.15);  // one patience wait at most: then it knows

  // Back: the deltas it owed go out, one per due point (aligned rounds), and
  // their versions are merged; finish takes the aggregator's θ.
  b.up();
  for (auto until = std::chrono::steady_clock::now() + 15s;
       std::chrono::steady_clock::now() < until && s->version(0) + s->version(1) < cut_version + 4;)
    steps(1);
  CHECK(s->version(0) + s->version(1) >= cut_version + 4);
  REQUIRE(s->finish(t, x, true).ok());
  const auto end = s->stats();
  MESSAGE("deltas sent " << end.syncs << ", deferred " << end.deferred << ", stall " << end.stall_s << " s over " << t
                         << " steps, finish " << end.finish_s << " s");
  CHECK(end.syncs > gone.syncs + 2);
  CHECK(end.rounds_joined >= 4);
  CHECK(end.stall_s < 0.2);
  // The final parameters are the aggregator's global θ, bit for bit.
  zmq::context_t ctx(1);
  diloco::client_options co;
  co.endpoint = b.endpoint;
  co.server_public = b.agg.public_z85;
  co.keys = b.site;
  co.job = "j";
  co.site = "site-0";
  auto probe = diloco::site_client::make(ctx, co).value();
  std::vector<float> global;
  REQUIRE(probe->join(global).ok());
  REQUIRE(global.size() == n);
  CHECK(std::memcmp(global.data(), x.data(), n * sizeof(float)) == 0);
}
