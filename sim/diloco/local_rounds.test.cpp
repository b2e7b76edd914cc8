// DiLoCo in one process from a cold start at CI size (a byte-level tiny GPT on
// the licence texts every Debian machine ships, split across four sites):
// codecs, outages, determinism, bad configs. The loss-parity test of issue 15
// (warm start, against sync DP) is local_rounds_parity.test.cpp.
#include "sim/diloco/local_rounds.hpp"
#include "sim/text/byte_text.hpp"

#include <doctest/doctest.h>

#include <cmath>


using namespace loom;
using namespace loom::sim;

namespace {

local_config tiny() {
  local_config c;
  c.model = model::gpt2_config{2, 4, 64, 32, 256, 256};
  c.batch = 8;
  c.seq_len = 32;
  c.steps = 400;
  c.sync_every = 50;
  return c;
}

const local_data& data() {
  static const local_data d = [] {
    auto text = licence_corpus();
    REQUIRE_MESSAGE(text.ok(), (text.ok() ? std::string() : text.err().to_string()));
    return bytes_as_sites(*text, 4, 0.05);
  }();
  return d;
}

const local_result& diloco_fp32() {
  static const local_result r = [] {
    auto x = run_diloco(tiny(), data());
    REQUIRE(x.ok());
    return *x;
  }();
  return r;
}

}  // namespace

TEST_CASE("DiLoCo on four sites with H = 50 learns from a cold start with eight outer steps") {
  const local_result& r = diloco_fp32();
  MESSAGE("DiLoCo fp32 from a cold start: first train loss " << r.train_loss.front() << ", validation "
                                                               << r.validation_loss);
  CHECK(r.validation_loss < r.train_loss.front() * 0.7f);
  CHECK(r.syncs == 400 / 50);
}

TEST_CASE("two DiLoCo runs with the same seed end with the same loss, bit for bit") {
  local_config c = tiny();
  c.steps = 120;
  c.uplink = c.downlink = codec::codec_id::int4;
  auto a = run_diloco(c, data());
  auto b = run_diloco(c, data());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->train_loss == b->train_loss);
  CHECK(a->validation_loss == b->validation_loss);
}

TEST_CASE("a site offline for a fifth of the syncs catches up from the global values and the loss stays within 3% of no outage") {
  local_config c = tiny();
  // Site 2 misses every syncs after steps 100 and 150 (two of eight), in one burst.
  c.online = [](int site, int step) { return !(site == 2 && (step == 100 || step == 150)); };
  auto r = run_diloco(c, data());
  REQUIRE(r.ok());
  CHECK(r->missed == 2);
  MESSAGE("with an outage " << r->validation_loss << ", without " << diloco_fp32().validation_loss);
  CHECK(r->validation_loss <= diloco_fp32().validation_loss * 1.03f);
}

TEST_CASE("bad local-rounds configs are refused naming the field") {
  local_config c = tiny();
  c.fragments = 3;
  c.sync_every = 2;
  CHECK(run_diloco(c, data()).code() == errc::invalid_argument);
  c = tiny();
  c.overlap = 60;
  auto r = run_diloco(c, data());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.err().message.find("overlap") != std::string::npos);
  local_data empty;
  CHECK(run_sync_dp(tiny(), empty).code() == errc::invalid_argument);
}

TEST_CASE("top-k deltas both ways with error feedback and plain averaging learn instead of running away") {
  // The server applies what it sends (outer_optimizer::correct); without that,
  // or with Nesterov on top of top-k's error feedback, the loss ran away (to 9-21).
  local_config c = tiny();
  c.uplink = c.downlink = codec::codec_id::topk;
  c.outer = diloco::outer_options::plain_average();
  auto r = run_diloco(c, data());
  REQUIRE(r.ok());
  MESSAGE("top-k: first train loss " << r->train_loss.front() << ", validation " << r->validation_loss);
  CHECK(std::isfinite(r->validation_loss));
  CHECK(r->validation_loss < r->train_loss.front() * 0.75f);
  CHECK(r->bytes_up == 8u * 4u * codec::encoded_bytes(codec::codec_id::topk, r->params));
}
