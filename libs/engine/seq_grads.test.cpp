// The engine's entry points for sequence-level losses: per-token
// log-probabilities, the backward from per-token gradients, and the backbone
// alone (hidden states of ln_f) with its backward. Checked against the
// ordinary loss path and against finite differences.
#include "libs/engine/model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace loom::engine;
namespace model = loom::model;

namespace {

model::gpt2_config tiny_config() { return {2, 2, 16, 8, 37, 40}; }

std::vector<std::int32_t> random_tokens(std::size_t n, std::uint32_t seed, int V) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = static_cast<std::int32_t>(rng() % unsigned(V));
  return t;
}

gpt2 make(int B, int T, std::uint64_t seed) {
  auto m = gpt2::create(tiny_config(), B, T);
  REQUIRE(m.ok());
  m->init_random(seed);
  return std::move(*m);
}

// J = Σ u·h over the hidden states, for a fixed u.
double hidden_objective(gpt2& m, std::span<const std::int32_t> in, const std::vector<float>& u) {
  REQUIRE(m.forward_hidden(in).ok());
  double j = 0;
  for (std::size_t i = 0; i < u.size(); ++i) j += double(u[i]) * m.hidden()[i];
  return j;
}

}  // namespace

TEST_CASE("token log-probabilities are minus each token's cross-entropy and average to minus the loss") {
  gpt2 m = make(2, 8, 1);
  const auto in = random_tokens(16, 2, 37), tg = random_tokens(16, 3, 37);
  auto loss = m.forward(in, tg);
  REQUIRE(loss.ok());
  std::vector<float> lp(16);
  m.token_logprobs(lp);
  double sum = 0;
  for (float x : lp) { CHECK(x < 0.0f); sum += x; }
  CHECK(-sum / 16 == doctest::Approx(*loss).epsilon(1e-6));
  // Token 5's own log-softmax from the logits.
  const auto logits = m.logits().subspan(5 * 40, 37);
  double mx = -1e30, s = 0;
  for (float z : logits) mx = std::max(mx, double(z));
  for (float z : logits) s += std::exp(double(z) - mx);
  CHECK(lp[5] == doctest::Approx(double(logits[tg[5]]) - mx - std::log(s)).epsilon(1e-5));
}

TEST_CASE("the backward from per-token gradients -w/sum(w) equals the weighted loss's backward") {
  gpt2 a = make(2, 8, 4), b = make(2, 8, 4);
  const auto in = random_tokens(16, 5, 37), tg = random_tokens(16, 6, 37);
  std::vector<float> w(16), dlogp(16);
  float ws = 0;
  for (int i = 0; i < 16; ++i) ws += w[i] = float(i % 3);
  for (int i = 0; i < 16; ++i) dlogp[i] = -w[i] / ws;
  REQUIRE(a.forward(in, tg, w).ok());
  a.backward(1.0f, false);
  REQUIRE(b.forward(in, tg).ok());
  for (float& g : b.grads()) g = std::numeric_limits<float>::quiet_NaN();
  const auto wpe = b.layout().offset(model::tensor_id::wpe);
  std::fill(b.grads().begin() + wpe, b.grads().begin() + wpe + b.layout().size(model::tensor_id::wpe), 0.0f);
  REQUIRE(b.backward_from_token_grads(dlogp, false).ok());
  for (std::size_t i = 0; i < a.grads().size(); ++i)
    REQUIRE(b.grads()[i] == doctest::Approx(a.grads()[i]).epsilon(1e-5).scale(1e-6));
}

TEST_CASE("a backward from per-token gradients of the wrong size or with a NaN is refused") {
  gpt2 m = make(2, 8, 7);
  const auto in = random_tokens(16, 8, 37);
  REQUIRE(m.forward(in, in).ok());
  std::vector<float> d(15, 0.0f);
  CHECK(m.backward_from_token_grads(d).code() == loom::errc::invalid_argument);
  d.assign(16, 0.0f);
  d[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(m.backward_from_token_grads(d).code() == loom::errc::invalid_argument);
}

TEST_CASE("the backbone alone gives the same hidden states as the full forward") {
  gpt2 m = make(2, 8, 9);
  const auto in = random_tokens(16, 10, 37);
  REQUIRE(m.forward(in).ok());
  const std::vector<float> full(m.hidden().begin(), m.hidden().end());
  REQUIRE(m.forward_hidden(in).ok());
  REQUIRE(full.size() == 16 * 16);
  CHECK(std::memcmp(full.data(), m.hidden().data(), full.size() * 4) == 0);
  std::vector<std::int32_t> bad = in;
  bad[2] = 37;
  CHECK(m.forward_hidden(bad).code() == loom::errc::invalid_argument);
}

TEST_CASE("the backward from hidden-state gradients matches finite differences and overwrites stale gradients") {
  gpt2 m = make(2, 8, 11);
  const auto in = random_tokens(16, 12, 37);
  std::vector<float> u(16 * 16);
  std::mt19937 rng(13);
  std::normal_distribution<float> n01;
  for (float& x : u) x = n01(rng);
  hidden_objective(m, in, u);
  for (float& g : m.grads()) g = std::numeric_limits<float>::quiet_NaN();
  const auto wpe = m.layout().offset(model::tensor_id::wpe);
  std::fill(m.grads().begin() + wpe, m.grads().begin() + wpe + m.layout().size(model::tensor_id::wpe), 0.0f);
  REQUIRE(m.backward_from_hidden(u, false).ok());
  for (float g : m.grads()) REQUIRE(std::isfinite(g));
  // The LM head is not used: wte's gradient comes from the embeddings alone.
  const std::size_t wte0 = m.layout().offset(model::tensor_id::wte);
  int absent = 0;
  while (std::find(in.begin(), in.end(), absent) != in.end()) ++absent;
  for (int c = 0; c < 16; ++c) CHECK(m.grads()[wte0 + std::size_t(absent) * 16 + c] == 0.0f);
  const std::vector<float> g(m.grads().begin(), m.grads().end());
  int checked = 0;
  for (auto id : {model::tensor_id::wte, model::tensor_id::qkvw, model::tensor_id::fcprojw, model::tensor_id::lnfw,
                  model::tensor_id::ln1b}) {
    const std::size_t off = m.layout().offset(id) + (id == model::tensor_id::wte ? in[0] * 16 + 3 : 5);
    const float keep = m.params()[off];
    const float eps = 1e-2f;
    m.params()[off] = keep + eps;
    const double jp = hidden_objective(m, in, u);
    m.params()[off] = keep - eps;
    const double jm = hidden_objective(m, in, u);
    m.params()[off] = keep;
    const double fd = (jp - jm) / (2 * eps);
    CHECK(g[off] == doctest::Approx(fd).epsilon(2e-2).scale(1e-2));
    ++checked;
  }
  CHECK(checked == 5);
  std::vector<float> short_grad(10);
  CHECK(m.backward_from_hidden(short_grad).code() == loom::errc::invalid_argument);
}
