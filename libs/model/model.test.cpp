#include "libs/model/gpt_config.hpp"
#include "libs/model/hf_names.hpp"
#include "libs/model/init.hpp"
#include "libs/model/memory.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace loom::model;

namespace {
gpt2_config tiny() {
  gpt2_config c;
  c.layers = 2;
  c.heads = 2;
  c.channels = 8;
  c.max_seq_len = 16;
  c.vocab = 50;
  c.padded_vocab = 64;
  return c;
}
}  // namespace

TEST_CASE("GPT-2 124M has llm.c's parameter count with the padded vocabulary") {
  gpt2_config d12;  // the defaults are GPT-2 small
  CHECK(make_param_layout(d12).total == 124'475'904u);
}

TEST_CASE("the memory estimate adds parameters, gradients, AdamW and activations") {
  gpt2_config d12;
  const auto m = estimate_training(d12, 16, 1024, 1, false);
  const std::uint64_t P = make_param_layout(d12).total;
  CHECK(m.params == 4 * P);
  CHECK(m.grads == 4 * P);
  CHECK(m.optimizer == 8 * P);
  // The attention matrices alone: L x B x NH x T x T floats.
  CHECK(m.activations > 4ull * 12 * 16 * 12 * 1024 * 1024);
  CHECK(m.total() == m.params + m.grads + m.optimizer + m.activations + m.batches + m.overhead);
  CHECK(m.describe().find("GiB") != std::string::npos);
  // Activations grow with the micro-batch, the weights do not.
  const auto half = estimate_training(d12, 8, 1024, 1, false);
  CHECK(half.params == m.params);
  CHECK(half.activations * 2 > m.activations - 4096);
  CHECK(half.activations * 2 < m.activations + (64ull << 20));
}

TEST_CASE("a tiny model with a batch of 65536 is estimated far beyond a laptop's memory") {
  gpt2_config c;
  c.layers = 4;
  c.heads = 4;
  c.channels = 128;
  c.max_seq_len = 64;
  c.vocab = 50257;
  c.padded_vocab = 50304;
  const auto m = estimate_training(c, 65536, 64, 1, false);
  CHECK(m.total() > (100ull << 30));  // the logits alone: 65536 x 64 x 50304 floats
}

TEST_CASE("activations count the engine's buffers for every layer") {
  const auto c = tiny();
  const auto a = activations(c, 2, 16);
  const std::uint64_t BT = 32, C = 8;
  const std::uint64_t per_layer = 5 * BT * C + 4 * BT + 3 * BT * C + 2 * 2 * 16 * 16 + 8 * BT * C;
  CHECK(a.acts == 2 * BT * C + 2 * per_layer + 6 * BT + BT * 64);
  CHECK(a.scratch == 3 * BT * C + 3 * BT * C + 4 * BT * C + 2 * 2 * 16);
}

TEST_CASE("the same seed initialises the same parameters and LayerNorm weights are one") {
  const auto c = tiny();
  const auto layout = make_param_layout(c);
  std::vector<float> a(layout.total), b(layout.total), other(layout.total);
  init_params(c, a, 7);
  init_params(c, b, 7);
  init_params(c, other, 8);
  CHECK(a == b);
  CHECK(a != other);
  CHECK(a[layout.offset(tensor_id::ln1w)] == 1.0f);
  CHECK(a[layout.offset(tensor_id::qkvb)] == 0.0f);
  // wte's padding rows stay zero.
  const std::size_t pad = layout.offset(tensor_id::wte) + std::size_t(c.vocab) * c.channels;
  for (std::size_t i = pad; i < layout.offset(tensor_id::wte) + layout.size(tensor_id::wte); ++i) REQUIRE(a[i] == 0.0f);
}

TEST_CASE("Hugging Face names cover every parameter once and round-trip exactly") {
  const auto c = tiny();
  const auto layout = make_param_layout(c);
  const auto ts = hf_gpt2_tensors(c);
  CHECK(ts.size() == 2 + 12 * std::size_t(c.layers) + 2);
  CHECK(ts.front().name == "transformer.wte.weight");
  CHECK(ts[2 + 2].name == "transformer.h.0.attn.c_attn.weight");
  CHECK(ts[2 + 2].shape == std::vector<std::uint64_t>{8, 24});  // Conv1D: (in, out)
  CHECK(ts.back().name == "transformer.ln_f.bias");
  std::uint64_t covered = 0;
  for (const auto& t : ts) covered += t.count();
  CHECK(covered == layout.total - std::uint64_t(c.padded_vocab - c.vocab) * c.channels);
  CHECK_FALSE(find_hf_tensor(c, "lm_head.weight"));
  REQUIRE(find_hf_tensor(c, "transformer.h.1.mlp.c_proj.weight"));
  CHECK(find_hf_tensor(c, "transformer.h.1.mlp.c_proj.weight")->layer == 1);

  std::vector<float> params(layout.total), back(layout.total, -1.0f);
  init_params(c, params, 3);
  for (std::size_t i = 0; i < params.size(); ++i) params[i] += 1e-3f * float(i % 97);  // no two equal biases
  for (const auto& t : ts) {
    std::vector<float> hf(t.count());
    copy_to_hf(c, t, params, hf);
    copy_from_hf(c, t, hf, back);
  }
  const std::size_t pad = layout.offset(tensor_id::wte) + std::size_t(c.vocab) * c.channels;
  for (std::size_t i = 0; i < params.size(); ++i)
    REQUIRE(back[i] == (i >= pad && i < layout.offset(tensor_id::wpe) ? 0.0f : params[i]));

  // A transposed tensor: HF's [in][out] is our [out][in].
  const auto qkv = *find_hf_tensor(c, "transformer.h.1.attn.c_attn.weight");
  std::vector<float> hf(qkv.count());
  copy_to_hf(c, qkv, params, hf);
  const std::size_t ours = layout.offset(tensor_id::qkvw) + 1 * 24 * 8;  // layer 1 of (L, 3C, C)
  CHECK(hf[3 * 24 + 5] == params[ours + 5 * 8 + 3]);  // HF [in 3][out 5] = ours [out 5][in 3]
}
