// fragment_plan: fragments tile the parameter vector (every value in exactly
// one), follow layers strided, stay balanced, and sync on the schedule
// (t mod H) == p*H/P.
#include "libs/diloco/fragment_plan.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

using namespace loom;
using namespace loom::diloco;

namespace {

model::gpt2_config tiny() {
  model::gpt2_config c;
  c.layers = 4, c.heads = 2, c.channels = 8, c.max_seq_len = 16, c.vocab = 50, c.padded_vocab = 64;
  return c;
}

// Every value of [0, total) is in exactly one range of one fragment.
void check_tiles(const fragment_plan& plan) {
  std::vector<range> all;
  for (int p = 0; p < plan.fragments(); ++p) {
    std::size_t sum = 0;
    for (const auto& r : plan.ranges(p)) {
      CHECK(r.count > 0);
      sum += r.count;
      all.push_back(r);
    }
    CHECK(sum == plan.size(p));
  }
  std::sort(all.begin(), all.end(), [](const range& a, const range& b) { return a.offset < b.offset; });
  std::size_t next = 0;
  for (const auto& r : all) {
    REQUIRE(r.offset == next);  // no gap, no overlap
    next += r.count;
  }
  CHECK(next == plan.total());
}

int fragment_of(const fragment_plan& plan, std::size_t offset) {
  for (int p = 0; p < plan.fragments(); ++p)
    for (const auto& r : plan.ranges(p))
      if (offset >= r.offset && offset < r.offset + r.count) return p;
  return -1;
}

}  // namespace

TEST_CASE("every parameter of a GPT-2 model is in exactly one fragment, for every fragment count") {
  for (int P = 1; P <= 4; ++P) {
    auto plan = fragment_plan::for_gpt2(tiny(), P, 8);
    REQUIRE(plan.ok());
    CHECK(plan->fragments() == P);
    CHECK(plan->total() == model::make_param_layout(tiny()).total);
    check_tiles(*plan);
  }
  auto d12 = fragment_plan::for_gpt2(model::gpt2_config{}, 4, 100);
  REQUIRE(d12.ok());
  check_tiles(*d12);
}

TEST_CASE("layer i goes to fragment i mod P and the final norm goes with the last layer") {
  const auto cfg = tiny();
  const auto layout = model::make_param_layout(cfg);
  auto plan = fragment_plan::for_gpt2(cfg, 3, 9);
  REQUIRE(plan.ok());
  using model::tensor_id;
  const std::size_t per_layer_qkv = layout.size(tensor_id::qkvw) / cfg.layers;
  const std::size_t per_layer_ln2 = layout.size(tensor_id::ln2b) / cfg.layers;
  for (int i = 0; i < cfg.layers; ++i) {
    CHECK(fragment_of(*plan, layout.offset(tensor_id::qkvw) + i * per_layer_qkv) == i % 3);
    CHECK(fragment_of(*plan, layout.offset(tensor_id::qkvw) + (i + 1) * per_layer_qkv - 1) == i % 3);
    CHECK(fragment_of(*plan, layout.offset(tensor_id::ln2b) + i * per_layer_ln2) == i % 3);
  }
  CHECK(fragment_of(*plan, layout.offset(tensor_id::lnfw)) == (cfg.layers - 1) % 3);
  CHECK(fragment_of(*plan, layout.offset(tensor_id::lnfb) + cfg.channels - 1) == (cfg.layers - 1) % 3);
  // wte's rows: 64 rows over 3 fragments -> 22, 21, 21 rows, in order.
  CHECK(fragment_of(*plan, layout.offset(tensor_id::wte)) == 0);
  CHECK(fragment_of(*plan, layout.offset(tensor_id::wte) + 22 * cfg.channels - 1) == 0);
  CHECK(fragment_of(*plan, layout.offset(tensor_id::wte) + 22 * cfg.channels) == 1);
  CHECK(fragment_of(*plan, layout.offset(tensor_id::wte) + 43 * cfg.channels) == 2);
}

TEST_CASE("GPT-2 124M in four fragments: each carries a quarter of the model, within 0.1%") {
  auto plan = fragment_plan::for_gpt2(model::gpt2_config{}, 4, 100);
  REQUIRE(plan.ok());
  const double quarter = plan->total() / 4.0;
  for (int p = 0; p < 4; ++p) CHECK(std::abs(plan->size(p) / quarter - 1.0) < 1e-3);
  CHECK(plan->max_size() < plan->total() / 4 + plan->total() / 1000);
}

TEST_CASE("one fragment is the whole vector in one range: plain DiLoCo") {
  auto plan = fragment_plan::for_gpt2(tiny(), 1, 50);
  REQUIRE(plan.ok());
  REQUIRE(plan->ranges(0).size() == 1);
  CHECK(plan->ranges(0)[0].offset == 0);
  CHECK(plan->ranges(0)[0].count == plan->total());
  for (std::uint64_t t = 1; t <= 200; ++t) CHECK(plan->due_after(t) == (t % 50 == 0 ? 0 : -1));
}

TEST_CASE("fragment p syncs after the steps where t mod H equals p*H/P, one fragment at a time") {
  auto plan = fragment_plan::flat(1000, 4, 12);
  REQUIRE(plan.ok());
  CHECK(plan->phase(0) == 0);
  CHECK(plan->phase(1) == 3);
  CHECK(plan->phase(2) == 6);
  CHECK(plan->phase(3) == 9);
  CHECK(plan->due_after(0) == -1);
  CHECK(plan->due_after(3) == 1);
  CHECK(plan->due_after(12) == 0);
  CHECK(plan->due_after(4) == -1);
  // Over 10 rounds each fragment syncs 10 times, H steps apart, and the
  // syncs are spread H/P = 3 steps apart.
  std::vector<std::vector<std::uint64_t>> seen(4);
  std::uint64_t last = 0;
  for (std::uint64_t t = 1; t <= 120; ++t) {
    const int p = plan->due_after(t);
    if (p < 0) continue;
    if (last != 0) CHECK(t - last == 3);
    last = t;
    seen[p].push_back(t);
  }
  for (int p = 0; p < 4; ++p) {
    REQUIRE(seen[p].size() == 10);
    for (std::size_t k = 0; k < seen[p].size(); ++k) CHECK(seen[p][k] == plan->sync_step(p, k));
    for (std::size_t k = 1; k < seen[p].size(); ++k) CHECK(seen[p][k] - seen[p][k - 1] == 12);
  }
  CHECK(plan->sync_step(0, 0) == 12);  // fragment 0 first syncs after H steps, not after step 0
  CHECK(plan->sync_step(2, 1) == 18);
}

TEST_CASE("an H that P does not divide still gives distinct phases") {
  auto plan = fragment_plan::flat(10, 3, 10);
  REQUIRE(plan.ok());
  CHECK(plan->phase(1) == 3);
  CHECK(plan->phase(2) == 6);
  CHECK(plan->size(0) == 4);  // 10 values: 4, 3, 3
  CHECK(plan->size(1) == 3);
  CHECK(plan->size(2) == 3);
}

TEST_CASE("a fragment gathers out of the full vector and scatters back in range order") {
  auto plan = fragment_plan::for_gpt2(tiny(), 2, 4);
  REQUIRE(plan.ok());
  std::vector<float> full(plan->total());
  std::iota(full.begin(), full.end(), 0.0f);
  std::vector<float> part(plan->size(1));
  plan->gather(1, full, part);
  CHECK(part[0] == static_cast<float>(plan->ranges(1)[0].offset));
  CHECK(part[plan->ranges(1)[0].count] == static_cast<float>(plan->ranges(1)[1].offset));
  for (auto& v : part) v = -v;
  plan->scatter(1, part, full);
  CHECK(full[plan->ranges(1)[1].offset] == -static_cast<float>(plan->ranges(1)[1].offset));
  CHECK(full[plan->ranges(0)[0].offset] == static_cast<float>(plan->ranges(0)[0].offset));
}

TEST_CASE("a plan with no fragment, more fragments than layers or H below P is refused, naming the field") {
  auto none = fragment_plan::for_gpt2(tiny(), 0, 10);
  REQUIRE_FALSE(none.ok());
  CHECK(none.code() == errc::invalid_argument);
  CHECK(none.err().message.find("fragments must be >= 1") != std::string::npos);
  auto many = fragment_plan::for_gpt2(tiny(), 5, 10);
  REQUIRE_FALSE(many.ok());
  CHECK(many.err().message.find("<= layers (4)") != std::string::npos);
  auto short_h = fragment_plan::flat(100, 4, 3);
  REQUIRE_FALSE(short_h.ok());
  CHECK(short_h.err().message.find("sync_every (H = 3)") != std::string::npos);
  auto bad_cfg = tiny();
  bad_cfg.channels = 7;
  CHECK(fragment_plan::for_gpt2(bad_cfg, 1, 1).code() == errc::invalid_argument);
  CHECK(fragment_plan::flat(2, 3, 3).code() == errc::invalid_argument);
}
