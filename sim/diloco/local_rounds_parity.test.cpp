// The loss-parity test of issue 15 at CI size: a byte-level tiny GPT on the
// licence texts every Debian machine ships, one corpus split fairly into four
// sites (1 KB blocks dealt round-robin: an IID split), H = 50.
//
// Warm start, as DiLoCo (which starts from a model pretrained on the same
// data): one checkpoint after 400 steps of sync DP, and both arms continue
// from it for 400 steps (8 outer steps) at equal tokens, so the warm-up's
// tokens and bytes are the same for both and the bytes below count the phase
// after it. From a cold start at this size DiLoCo ends 1.13-1.22x sync DP's
// loss (diloco_bench; one Adam on batch 32 per step against four on batch 8);
// the full-size figures are diloco_bench --parity's case=parity.
//
// Tuned, both arms: sync DP's lr swept over {3, 5, 7, 10}e-3 from this
// checkpoint (validation 1.904, 1.870, 1.873, 1.896): 5e-3. DiLoCo takes the
// same inner lr and the outer Nesterov (η 0.7, μ 0.9). Seeds 7, 8, 9
// (diloco_bench --licences --block 1024 --warm 400 --steps 400 --dp-lr 5e-3
// --lr 5e-3 --momentum 0.9 --seed S) give ratios 1.0040, 0.9993, 1.0044.
// Each site its own licences instead (non-IID, --block 0) is harder: 1.0034,
// 1.0613, 1.0363 over the same seeds; not within 2% at this size.
#include "sim/diloco/local_rounds.hpp"
#include "sim/text/byte_text.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::sim;

namespace {

local_config parity() {
  local_config c;
  c.model = model::gpt2_config{2, 4, 64, 32, 256, 256};
  c.batch = 8;  // per site: sync DP takes 4 × 8 windows per step
  c.seq_len = 32;
  c.steps = 400;
  c.sync_every = 50;
  c.lr = 5e-3f;
  return c;
}

const local_data& data() {
  static const local_data d = [] {
    auto text = licence_corpus();
    REQUIRE_MESSAGE(text.ok(), text.err().to_string());
    return bytes_as_sites(*text, 4, 0.05, 1024);
  }();
  return d;
}

const local_checkpoint& warm() {
  static const local_checkpoint cp = [] {
    local_config c = parity();
    c.lr = 3e-3f;  // the warm-up's own lr (the cold-start optimum), whatever the arms take after it
    auto x = run_warm_up(c, data(), 400);
    REQUIRE(x.ok());
    return *x;
  }();
  return cp;
}

const local_result& sync_dp() {
  static const local_result r = [] {
    auto x = run_sync_dp(parity(), data(), warm());
    REQUIRE(x.ok());
    return *x;
  }();
  return r;
}

const local_result& diloco_fp32() {
  static const local_result r = [] {
    auto x = run_diloco(parity(), data(), warm());
    REQUIRE(x.ok());
    return *x;
  }();
  return r;
}

}  // namespace

TEST_CASE("from a shared warm start, DiLoCo on four sites with H = 50 ends within 2% of sync DP's loss at equal tokens") {
  const float dp = sync_dp().validation_loss;
  const local_result& r = diloco_fp32();
  MESSAGE("checkpoint " << warm().validation_loss << ", sync DP " << dp << ", DiLoCo fp32 " << r.validation_loss
                        << " (ratio " << r.validation_loss / dp << ", " << r.syncs << " outer steps)");
  // Both arms learned past the checkpoint: the phase measured is not a no-op.
  CHECK(dp < warm().validation_loss * 0.95f);
  CHECK(r.validation_loss < warm().validation_loss * 0.95f);
  CHECK(r.syncs == 400 / 50);
  CHECK(r.train_loss.size() == sync_dp().train_loss.size());  // equal steps, 4 × 8 windows each
  CHECK(r.validation_loss <= dp * 1.02f);
}

TEST_CASE("int8 deltas both ways stay within a further 0.5% and move 200 times fewer bytes than per-step fp32 sync") {
  local_config c = parity();
  c.uplink = c.downlink = codec::codec_id::int8;
  auto int8 = run_diloco(c, data(), warm());
  REQUIRE(int8.ok());
  const float fp32 = diloco_fp32().validation_loss;
  // Bytes every site sent and received after the checkpoint: a ring
  // all-reduce of fp32 gradients every step against int8 deltas and updates
  // every H steps. (The warm-up's own ring bytes are the same for both arms.)
  const double dp_bytes = double(sync_dp().bytes_up + sync_dp().bytes_down);
  const double bytes = double(int8->bytes_up + int8->bytes_down);
  MESSAGE("fp32 " << fp32 << ", int8 " << int8->validation_loss << " (sync DP " << sync_dp().validation_loss
                  << "); bytes per site: ring fp32 " << dp_bytes / 4 << ", int8 DiLoCo " << bytes / 4 << " ("
                  << dp_bytes / bytes << "x fewer)");
  CHECK(int8->validation_loss <= fp32 * 1.005f);
  CHECK(int8->validation_loss <= sync_dp().validation_loss * 1.025f);
  CHECK(dp_bytes == 4.0 * double(ring_fp32_bytes(int8->params, 4, 400)));
  CHECK(int8->bytes_up == 8u * 4u * codec::encoded_bytes(codec::codec_id::int8, int8->params));
  CHECK(int8->bytes_down == int8->bytes_up);
  CHECK(dp_bytes / bytes >= 200.0);
}

TEST_CASE("a warm-up checkpoint of another model's size is refused") {
  local_config c = parity();
  local_checkpoint cp;
  cp.params.assign(10, 0.0f);
  cp.adam_m = cp.adam_v = cp.params;
  auto r = run_diloco(c, data(), cp);
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.err().message.find("checkpoint") != std::string::npos);
  CHECK(run_warm_up(c, data(), 0).code() == errc::invalid_argument);
}
