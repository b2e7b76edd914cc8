// The whole model: gradient check of a tiny GPT-2 against the float64
// reference, masking, determinism, gradient accumulation and learning.
#include "libs/engine/model.hpp"

#include "libs/model/memory.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <string_view>

#include "libs/engine/reference.test.hpp"
#include "libs/engine/train_step.hpp"

using namespace loom::engine;
namespace model = loom::model;
namespace ref = loom::engine::ref;

namespace {

// The grad-check model: L2 H2 C16 T8 V37 Vp40, batch 2.
model::gpt2_config tiny_config() { return {2, 2, 16, 8, 37, 40}; }

std::vector<std::int32_t> random_tokens(std::size_t n, std::uint32_t seed, int V) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = static_cast<std::int32_t>(rng() % unsigned(V));
  return t;
}

gpt2 make(const model::gpt2_config& cfg, int B, int T, std::uint64_t seed) {
  auto m = gpt2::create(cfg, B, T);
  REQUIRE(m.ok());
  m->init_random(seed);
  return std::move(*m);
}

}  // namespace

TEST_CASE("gpt2::create allocates what libs/model's memory estimate counts") {
  for (auto [B, T] : {std::pair{1, 1}, std::pair{2, 8}, std::pair{3, 5}}) {
    const model::gpt2_config c = tiny_config();
    auto m = gpt2::create(c, B, T);
    REQUIRE(m.ok());
    const auto a = model::activations(c, std::uint64_t(B), std::uint64_t(T));
    CHECK(m->allocated_floats() == 2 * model::make_param_layout(c).total + a.acts + a.scratch);
    if (!probe_bf16().native) continue;  // bf16's layout below (skipped visibly in bf16_model.test.cpp)
    auto h = gpt2::create(c, B, T, precision::bf16);
    REQUIRE(h.ok());
    const auto v = model::bf16_layout(c, std::uint64_t(B), std::uint64_t(T));
    CHECK(h->allocated_floats() == 2 * model::make_param_layout(c).total + a.acts - v.fp32_dropped + a.scratch);
    // allocated_bytes adds oneDNN's shared scratchpad, which is made at the first matmul (none yet).
    CHECK(h->allocated_bytes() == 4 * h->allocated_floats() + v.bytes());
  }
}

TEST_CASE("gpt2::create refuses bad shapes with invalid_argument") {
  model::gpt2_config c = tiny_config();
  c.channels = 15;  // not a multiple of heads
  CHECK(gpt2::create(c, 1, 4).code() == loom::errc::invalid_argument);
  c = tiny_config();
  c.padded_vocab = 30;
  CHECK(gpt2::create(c, 1, 4).code() == loom::errc::invalid_argument);
  CHECK(gpt2::create(tiny_config(), 1, 9).code() == loom::errc::invalid_argument);
  CHECK(gpt2::create(tiny_config(), 0, 8).code() == loom::errc::invalid_argument);
  CHECK(model::make_param_layout(model::gpt2_config{}).total == 124475904u);  // GPT-2 124M, llm.c's count
}

TEST_CASE("gpt2::forward refuses out-of-range ids, bad weights and all-masked batches") {
  gpt2 m = make(tiny_config(), 1, 4, 1);
  const std::vector<std::int32_t> ok{1, 2, 3, 4}, bad{1, 2, 37, 4};
  CHECK(m.forward(bad).code() == loom::errc::invalid_argument);
  CHECK(m.forward(ok, bad).code() == loom::errc::invalid_argument);
  CHECK(m.forward(ok, ok, std::vector<float>{1, -1, 1, 1}).code() == loom::errc::invalid_argument);
  CHECK(m.forward(ok, ok, std::vector<float>{0, 0, 0, 0}).code() == loom::errc::invalid_argument);
  CHECK(m.forward(std::vector<std::int32_t>{1, 2}).code() == loom::errc::invalid_argument);
  CHECK(m.forward(ok, ok).ok());
}

TEST_CASE("a forward without targets gives the same logits, zero in the padding columns") {
  gpt2 m = make(tiny_config(), 2, 8, 5);
  const auto in = random_tokens(16, 6, 37), tgt = random_tokens(16, 7, 37);
  REQUIRE(m.forward(in, tgt).ok());
  const std::vector<float> with(m.logits().begin(), m.logits().end());
  auto only = m.forward(in);
  REQUIRE(only.ok());
  CHECK(*only == 0.0f);
  REQUIRE(m.logits().size() == 16u * 40u);
  CHECK(std::memcmp(with.data(), m.logits().data(), with.size() * 4) == 0);
  for (int row = 0; row < 16; ++row)
    for (int v = 37; v < 40; ++v) CHECK(m.logits()[row * 40 + v] == 0.0f);
}

TEST_CASE("a tiny GPT-2's loss and every parameter gradient match float64 finite differences") {
  const model::gpt2_config cfg = tiny_config();
  const int B = 2, T = 8;
  gpt2 m = make(cfg, B, T, 7);
  // Move LayerNorm parameters and biases off 1/0 so their gradients are tested in general position.
  const model::param_layout lay = m.layout();
  for (auto id : {model::tensor_id::ln1w, model::tensor_id::ln2w, model::tensor_id::lnfw}) {
    const auto r = ref::random_floats(lay.size(id), 100 + int(id), 0.7f, 1.3f);
    std::memcpy(m.params().data() + lay.offset(id), r.data(), r.size() * 4);
  }
  for (auto id : {model::tensor_id::ln1b, model::tensor_id::qkvb, model::tensor_id::attprojb, model::tensor_id::ln2b,
                  model::tensor_id::fcb, model::tensor_id::fcprojb, model::tensor_id::lnfb}) {
    const auto r = ref::random_floats(lay.size(id), 100 + int(id), -0.1f, 0.1f);
    std::memcpy(m.params().data() + lay.offset(id), r.data(), r.size() * 4);
  }
  const auto in = random_tokens(B * T, 1, cfg.vocab), tgt = random_tokens(B * T, 2, cfg.vocab);
  std::vector<float> w(B * T, 1.0f);
  w[0] = w[3] = w[9] = 0.0f;  // masked, as SFT prompt tokens
  w[5] = 2.5f;
  w[12] = 0.5f;

  auto loss = m.forward(in, tgt, w);
  REQUIRE(loss.ok());
  m.zero_grad();
  m.backward();

  ref::vec p(m.params().begin(), m.params().end());
  const double ref_loss = ref::gpt2_loss(p, cfg, B, T, in, tgt, w);
  MESSAGE("loss float32 " << *loss << " float64 " << ref_loss);
  CHECK(std::abs(*loss - ref_loss) < 1e-5 * ref_loss);

  const ref::vec num = ref::numeric_grad(p, [&] { return ref::gpt2_loss(p, cfg, B, T, in, tgt, w); });
  // Per tensor; wte's padding rows have zero gradient on both sides.
  double worst = 0;
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto id = static_cast<model::tensor_id>(i);
    const std::size_t off = lay.offset(id), n = lay.size(id);
    const ref::vec nt(num.begin() + off, num.begin() + off + n);
    const double e = ref::rel_error(m.grads().subspan(off, n), nt);
    worst = std::max(worst, e);
    INFO("tensor " << model::tensor_name(id));
    CHECK(e < 1e-5);  // achieved here: <= 2.5e-7
  }
  MESSAGE("whole-model worst per-tensor grad rel. error: " << worst);
  const double all = ref::rel_error(m.grads(), num);
  MESSAGE("whole-model grad rel. error over all parameters: " << all);
  CHECK(all < 5e-6);  // achieved here: 1.2e-7
}

TEST_CASE("a masked token's target changes neither the loss nor any gradient") {
  gpt2 m = make(tiny_config(), 2, 8, 3);
  const auto in = random_tokens(16, 4, 37);
  auto tgt = random_tokens(16, 5, 37);
  std::vector<float> w(16, 1.0f);
  w[6] = 0.0f;
  auto run = [&] {
    auto l = m.forward(in, tgt, w);
    REQUIRE(l.ok());
    m.zero_grad();
    m.backward();
    return std::make_pair(*l, std::vector<float>(m.grads().begin(), m.grads().end()));
  };
  const auto a = run();
  tgt[6] = (tgt[6] + 11) % 37;
  const auto b = run();
  CHECK(a.first == b.first);
  CHECK(std::memcmp(a.second.data(), b.second.data(), a.second.size() * 4) == 0);
}

TEST_CASE("backward without accumulation overwrites stale gradients, so no zero_grad is needed") {
  gpt2 m = make(tiny_config(), 2, 8, 12);
  const auto in = random_tokens(16, 13, 37), tgt = random_tokens(16, 14, 37);
  REQUIRE(m.forward(in, tgt).ok());
  m.zero_grad();
  m.backward();
  const std::vector<float> want(m.grads().begin(), m.grads().end());
  for (float& g : m.grads()) g = std::numeric_limits<float>::quiet_NaN();
  // wpe rows >= T are never written by backward: they keep what zero_grad/allocation left.
  const auto wpe = m.layout().offset(model::tensor_id::wpe);
  std::fill(m.grads().begin() + wpe, m.grads().begin() + wpe + m.layout().size(model::tensor_id::wpe), 0.0f);
  REQUIRE(m.forward(in, tgt).ok());
  m.backward(1.0f, /*accumulate=*/false);
  CHECK(std::memcmp(want.data(), m.grads().data(), want.size() * 4) == 0);
}

TEST_CASE("gradient accumulation over two half batches equals one full batch") {
  const model::gpt2_config cfg{2, 4, 32, 16, 64, 64};
  gpt2 full = make(cfg, 2, 16, 9), half = make(cfg, 1, 16, 9);
  const auto in = random_tokens(32, 10, 64), tgt = random_tokens(32, 11, 64);
  const std::span<const std::int32_t> i(in), t(tgt);
  REQUIRE(full.forward(i, t).ok());
  full.zero_grad();
  full.backward();
  half.zero_grad();
  for (int k = 0; k < 2; ++k) {
    REQUIRE(half.forward(i.subspan(16 * k, 16), t.subspan(16 * k, 16)).ok());
    half.backward(0.5f);
  }
  const ref::vec g(full.grads().begin(), full.grads().end());
  CHECK(ref::rel_error(half.grads(), g) < 1e-5);
}

namespace {

// A fixed byte-level text (vocab 256) for the learning test.
constexpr std::string_view paragraph =
    "The loom hums in the corner of the workshop. Every morning the weaver checks the warp, "
    "counts the threads, and winds the shuttle. The pattern grows one row at a time: blue, "
    "then white, then blue again. Visitors ask how long a blanket takes, and the weaver smiles "
    "and says that it takes as long as it takes. A good cloth is patient work. The threads "
    "remember every mistake, so the weaver goes slowly and looks twice before each pass.";

struct run_result {
  std::vector<float> losses;
  std::vector<float> params;
};

// Trains a small byte-level model on the paragraph; windows are picked by a
// fixed-seed generator, so two calls see the same batches.
run_result train_on_paragraph(int steps, int accum) {
  const model::gpt2_config cfg{2, 4, 64, 32, 256, 256};
  const int B = 8, T = 32;
  gpt2 m = make(cfg, B, T, 42);
  adamw opt(m.layout().total, adamw_config{0.9f, 0.95f, 1e-8f, 0.01f}, m.layout().ranges());
  const lr_schedule sched{3e-3f, 3e-4f, 10, steps};
  std::mt19937 rng(1234);
  std::vector<std::int32_t> in(std::size_t(B) * T * accum), tgt(in.size());
  std::vector<micro_batch> micro(static_cast<std::size_t>(accum));
  run_result r;
  for (int s = 0; s < steps; ++s) {
    for (std::size_t row = 0; row < in.size() / T; ++row) {
      const std::size_t start = rng() % (paragraph.size() - T - 1);
      for (int t = 0; t < T; ++t) {
        in[row * T + t] = static_cast<unsigned char>(paragraph[start + t]);
        tgt[row * T + t] = static_cast<unsigned char>(paragraph[start + t + 1]);
      }
    }
    for (int k = 0; k < accum; ++k)
      micro[k] = {std::span(in).subspan(std::size_t(k) * B * T, std::size_t(B) * T),
                  std::span(tgt).subspan(std::size_t(k) * B * T, std::size_t(B) * T), {}};
    auto st = train_step(m, opt, sched, 1.0f, s, micro);
    REQUIRE(st.ok());
    r.losses.push_back(st->loss);
  }
  r.params.assign(m.params().begin(), m.params().end());
  return r;
}

}  // namespace

TEST_CASE("two identical training runs give bitwise-identical losses and parameters") {
  const run_result a = train_on_paragraph(4, 2), b = train_on_paragraph(4, 2);
  REQUIRE(a.losses.size() == b.losses.size());
  for (std::size_t i = 0; i < a.losses.size(); ++i) CHECK(a.losses[i] == b.losses[i]);
  CHECK(std::memcmp(a.params.data(), b.params.data(), a.params.size() * 4) == 0);
}

TEST_CASE("a byte-level model learns a fixed paragraph: loss below 1.0 within 300 steps") {
  const run_result r = train_on_paragraph(300, 1);
  MESSAGE("loss at step 0: " << r.losses.front() << ", step 100: " << r.losses[100]
                             << ", step 299: " << r.losses.back());
  CHECK(r.losses.front() > 5.0f);  // ≈ ln 256 = 5.55 at initialisation
  CHECK(r.losses.back() < 1.0f);
}

TEST_CASE("train_step reports the pre-clip gradient norm and the scheduled LR, and refuses bad input") {
  gpt2 m = make(tiny_config(), 2, 8, 21);
  adamw opt(m.layout().total, {}, m.layout().ranges());
  const lr_schedule sched{1e-3f, 1e-4f, 4, 10};
  const auto in = random_tokens(16, 22, 37), tgt = random_tokens(16, 23, 37);
  const std::vector<float> before(m.params().begin(), m.params().end());
  const micro_batch mb{in, tgt, {}};
  auto st = train_step(m, opt, sched, 1e-3f, 2, std::span(&mb, 1));
  REQUIRE(st.ok());
  CHECK(st->lr == sched.at(2));
  CHECK(st->grad_norm == static_cast<float>(global_norm(m.grads())));  // grads kept after the step
  CHECK(st->grad_norm > 1e-3f);  // so this step was clipped
  CHECK(std::memcmp(before.data(), m.params().data(), before.size() * 4) != 0);
  CHECK(train_step(m, opt, sched, 1.0f, 3, {}).code() == loom::errc::invalid_argument);
  const micro_batch no_targets{in, {}, {}};
  CHECK(train_step(m, opt, sched, 1.0f, 3, std::span(&no_targets, 1)).code() == loom::errc::invalid_argument);
  CHECK(opt.steps_taken() == 1);
}

TEST_CASE("an interrupt flag stops forward and backward between layers and leaves the parameters alone") {
  gpt2 m = make(tiny_config(), 2, 8, 3);
  const auto in = random_tokens(16, 1, 37), tg = random_tokens(16, 2, 37);
  const std::vector<float> before(m.params().begin(), m.params().end());
  std::atomic<bool> stop{true};
  m.set_interrupt([&] { return stop.load(); });
  auto l = m.forward(in, tg);
  REQUIRE(!l.ok());
  CHECK(l.code() == loom::errc::unavailable);
  CHECK(l.err().message.find("interrupted") != std::string::npos);
  stop = false;
  REQUIRE(m.forward(in, tg).ok());
  stop = true;
  CHECK_FALSE(m.backward());
  CHECK(std::equal(before.begin(), before.end(), m.params().begin()));
  stop = false;
  REQUIRE(m.forward(in, tg).ok());
  CHECK(m.backward());
}
