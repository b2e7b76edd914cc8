// The drivers' edges: a reward head survives a safetensors round trip and
// refuses another shape; batches that do not fit the models are refused;
// the GRPO sampler is deterministic for a seed and masks only what it drew.
#include "services/trainer/align/dpo.hpp"
#include "services/trainer/align/grpo.hpp"
#include "services/trainer/align/reward_model.hpp"
#include "libs/engine/kernels.hpp"

#include <doctest/doctest.h>

#include <barrier>
#include <cmath>
#include <filesystem>
#include <thread>
#include <unistd.h>

using namespace loom;
using namespace loom::align;

namespace {

engine::gpt2 make(int B, int T, std::uint64_t seed) {
  engine::kernels::set_threads(1);  // a model this small: OpenMP waiters would only contend
  auto m = engine::gpt2::create({2, 2, 16, 16, 256, 256}, B, T);
  REQUIRE(m.ok());
  m->init_random(seed);
  return std::move(*m);
}

pair_batch one_pair_batch(int T) {
  const pair_tokens t{encode_bytes("ab:"), encode_bytes("CD!"), encode_bytes("cd.")};
  auto b = make_pair_batch(std::span(&t, 1), T);
  REQUIRE(b.ok());
  return *b;
}

}  // namespace

TEST_CASE("a reward head survives a safetensors round trip and refuses another width") {
  reward_head h(16);
  h.init(5);
  h.params()[16] = 0.25f;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("loom-rm-head-" + std::to_string(::getpid()) + ".safetensors")).string();
  const auto views = h.tensors();
  REQUIRE(ckpt::write_safetensors(path, views).ok());
  auto f = ckpt::read_safetensors(path);
  REQUIRE(f.ok());
  reward_head back(16);
  REQUIRE(back.load(*f).ok());
  CHECK(std::equal(h.params().begin(), h.params().end(), back.params().begin()));
  reward_head wide(32);
  CHECK(wide.load(*f).code() == errc::invalid_argument);
  const std::vector<ckpt::tensor_view> only_w{views[0]};
  REQUIRE(ckpt::write_safetensors(path, only_w).ok());
  auto g = ckpt::read_safetensors(path);
  REQUIRE(g.ok());
  CHECK(back.load(*g).code() == errc::not_found);
  std::filesystem::remove(path);
}

TEST_CASE("batches that do not fit the models are refused with invalid_argument") {
  engine::gpt2 pi = make(2, 8, 1), ref = make(2, 8, 1), wrong = make(4, 8, 1);
  dpo_driver d(pi, ref, {});
  CHECK(d.run(one_pair_batch(8), false).ok());
  CHECK(d.run(one_pair_batch(6), false).code() == errc::invalid_argument);
  dpo_driver d2(wrong, ref, {});
  CHECK(d2.run(one_pair_batch(8), false).code() == errc::invalid_argument);
  reward_head h(16);
  reward_driver rm(pi, h);
  CHECK(rm.run(one_pair_batch(8), true).ok());
  CHECK(rm.run(one_pair_batch(6), true).code() == errc::invalid_argument);
  const std::vector<std::int32_t> in(16, 1);
  CHECK(rm.score(in, std::vector<int>{0, 8}).code() == errc::invalid_argument);
  CHECK(rm.score(in, std::vector<int>{0}).code() == errc::invalid_argument);
}

TEST_CASE("GRPO sampling is deterministic for a seed and masks exactly the sampled tokens") {
  engine::gpt2 pi = make(4, 16, 2), ref = make(4, 16, 2);
  grpo_options o;
  o.group = 2;
  o.max_new_tokens = 5;
  auto zero = [](const rollout_batch& b) -> result<std::vector<float>> { return std::vector<float>(std::size_t(b.rows), 0.0f); };
  grpo_driver g(pi, ref, zero, o);
  const std::vector<std::vector<std::int32_t>> prompts{encode_bytes("shout ab: "), encode_bytes("hi: ")};
  auto a = g.sample(prompts, 9), b = g.sample(prompts, 9), c = g.sample(prompts, 10);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK(a->inputs == b->inputs);
  CHECK(a->inputs != c->inputs);
  for (int r = 0; r < 4; ++r) {
    const auto& resp = a->response[std::size_t(r)];
    CHECK(!resp.empty());
    CHECK(resp.size() <= 5);
    float masked = 0;
    for (int t = 0; t < 16; ++t) masked += a->mask[std::size_t(r * 16 + t)];
    CHECK(masked == float(resp.size()));
    CHECK(a->prompt_index[std::size_t(r)] == r / 2);
    CHECK(a->last[std::size_t(r)] == int(prompts[std::size_t(r / 2)].size() + resp.size()) - 1);
  }
  CHECK(g.sample(std::span(prompts).first(1), 9).code() == errc::invalid_argument);
  // An all-zero reward gives zero advantages: only the KL term (zero at π = ref) remains.
  engine::adamw opt(pi.layout().total, {}, pi.layout().ranges());
  auto st = g.step(opt, {1e-3f, 1e-4f, 1, 10}, 1.0f, 0, prompts, 9);
  REQUIRE(st.ok());
  CHECK(st->grad_norm == doctest::Approx(0.0).scale(1e-6));
  CHECK(st->kl == doctest::Approx(0.0).scale(1e-6));
}

TEST_CASE("a DPO step with cached reference log-probs is bitwise the step that computes them") {
  engine::gpt2 a = make(2, 8, 3), b = make(2, 8, 3), ref = make(2, 8, 4);
  const pair_batch batch = one_pair_batch(8);
  dpo_driver da(a, ref, {0.5f}), db(b, ref, {0.5f});
  auto cached = db.reference_logprobs(batch);
  REQUIRE(cached.ok());
  engine::adamw oa(a.layout().total, {}, a.layout().ranges()), ob(b.layout().total, {}, b.layout().ranges());
  const engine::lr_schedule s{1e-3f, 1e-4f, 1, 10};
  for (int step = 0; step < 3; ++step) {
    auto ra = da.step(oa, s, 1.0f, step, std::span(&batch, 1));
    auto rb = db.step(ob, s, 1.0f, step, std::span(&batch, 1), std::span(&*cached, 1));
    REQUIRE(ra.ok());
    REQUIRE(rb.ok());
    CHECK(ra->m.pref.loss == rb->m.pref.loss);
  }
  CHECK(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
  const std::vector<float> wrong(3, 0.0f);
  CHECK(db.run(batch, false, 1.0f, false, false, wrong).code() == errc::invalid_argument);
}

namespace {

// Two members in two threads; the sum of a buffer in rank order (the same
// bits on both), as the ring all-reduce gives every member the same sum.
struct two_member_sum {
  std::barrier<> sync{2};
  std::vector<float> slot[2];
  status operator()(int rank, std::span<float> buf) {
    slot[rank].assign(buf.begin(), buf.end());
    sync.arrive_and_wait();
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = slot[0][i] + slot[1][i];
    sync.arrive_and_wait();
    return ok_status();
  }
};

}  // namespace

TEST_CASE("data-parallel DPO and reward-model steps of two members equal one member's step over both micro-batches") {
  const pair_tokens t0{encode_bytes("ab:"), encode_bytes("CD!"), encode_bytes("cd.")};
  const pair_tokens t1{encode_bytes("xyz:"), encode_bytes("Q!"), encode_bytes("QQQQ.")};
  const pair_batch mb[2] = {*make_pair_batch(std::span(&t0, 1), 8), *make_pair_batch(std::span(&t1, 1), 8)};
  const engine::lr_schedule s{1e-3f, 1e-4f, 1, 10};
  // One member, both micro-batches.
  engine::gpt2 solo = make(2, 8, 3), ref = make(2, 8, 4);
  engine::adamw so(solo.layout().total, {}, solo.layout().ranges());
  dpo_driver ds(solo, ref, {0.5f});
  auto want = ds.step(so, s, 1.0f, 0, mb);
  REQUIRE(want.ok());
  engine::gpt2 rsolo = make(2, 8, 5);
  reward_head hsolo(16);
  hsolo.init(6);
  engine::adamw rso(rsolo.layout().total, {}, rsolo.layout().ranges()), rsh(17, {}, hsolo.ranges());
  reward_driver rs(rsolo, hsolo);
  auto rwant = rs.step(rso, rsh, s, 1.0f, 0, mb);
  REQUIRE(rwant.ok());
  // Two members, one micro-batch each.
  two_member_sum sum, rsum;
  std::vector<float> params[2], rparams[2], grads[2];
  double loss[2] = {0, 0}, rloss[2] = {0, 0};
  auto member = [&](int rank) {
    engine::kernels::set_threads(1);
    engine::gpt2 pi = make(2, 8, 3), r = make(2, 8, 4);
    engine::adamw o(pi.layout().total, {}, pi.layout().ranges());
    dpo_driver d(pi, r, {0.5f});
    const engine::data_parallel dp{2, [&](std::span<float> b) { return sum(rank, b); }};
    auto st = d.step(o, s, 1.0f, 0, std::span(&mb[rank], 1), {}, &dp);
    loss[rank] = st ? st->m.pref.loss : -1;
    params[rank].assign(pi.params().begin(), pi.params().end());
    grads[rank].assign(pi.grads().begin(), pi.grads().end());
    engine::gpt2 b = make(2, 8, 5);
    reward_head h(16);
    h.init(6);
    engine::adamw bo(b.layout().total, {}, b.layout().ranges()), ho(17, {}, h.ranges());
    reward_driver rd(b, h);
    const engine::data_parallel rdp{2, [&](std::span<float> x) { return rsum(rank, x); }};
    auto rst = rd.step(bo, ho, s, 1.0f, 0, std::span(&mb[rank], 1), &rdp);
    rloss[rank] = rst ? rst->bt.loss : -1;
    rparams[rank].assign(b.params().begin(), b.params().end());
    rparams[rank].insert(rparams[rank].end(), h.params().begin(), h.params().end());
  };
  std::thread a(member, 0), b(member, 1);
  a.join();
  b.join();
  CHECK(loss[0] == doctest::Approx(want->m.pref.loss).epsilon(1e-6));
  CHECK(rloss[1] == doctest::Approx(rwant->bt.loss).epsilon(1e-6));
  CHECK(params[0] == params[1]);  // the same update on every member
  CHECK(rparams[0] == rparams[1]);
  double worst = 0;
  for (std::size_t i = 0; i < params[0].size(); ++i)
    worst = std::max(worst, double(std::fabs(params[0][i] - solo.params()[i])));
  for (std::size_t i = 0; i < rsolo.params().size(); ++i)
    worst = std::max(worst, double(std::fabs(rparams[0][i] - rsolo.params()[i])));
  double gerr = 0, gmax = 0;  // the all-reduced gradient against one member's accumulated one
  for (std::size_t i = 0; i < grads[0].size(); ++i) {
    gerr = std::max(gerr, double(std::fabs(grads[0][i] - solo.grads()[i])));
    gmax = std::max(gmax, double(std::fabs(solo.grads()[i])));
  }
  MESSAGE("largest parameter difference, two members vs one: " << worst << "; gradient " << gerr << " of " << gmax);
  CHECK(worst < 1e-6);
  CHECK(gmax > 0.0);
  CHECK(gerr <= 1e-5 * gmax);
}
