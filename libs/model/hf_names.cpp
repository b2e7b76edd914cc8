#include "libs/model/hf_names.hpp"

#include <algorithm>
#include <cstring>

namespace loom::model {
namespace {

struct per_layer_name {
  tensor_id id;
  const char* suffix;
  bool transposed;
};
// HF's order inside a block (its state dict lists them so).
constexpr per_layer_name block[] = {
    {tensor_id::ln1w, "ln_1.weight", false},          {tensor_id::ln1b, "ln_1.bias", false},
    {tensor_id::qkvw, "attn.c_attn.weight", true},    {tensor_id::qkvb, "attn.c_attn.bias", false},
    {tensor_id::attprojw, "attn.c_proj.weight", true}, {tensor_id::attprojb, "attn.c_proj.bias", false},
    {tensor_id::ln2w, "ln_2.weight", false},          {tensor_id::ln2b, "ln_2.bias", false},
    {tensor_id::fcw, "mlp.c_fc.weight", true},        {tensor_id::fcb, "mlp.c_fc.bias", false},
    {tensor_id::fcprojw, "mlp.c_proj.weight", true},  {tensor_id::fcprojb, "mlp.c_proj.bias", false},
};

// Our shape of one layer's slice (or the whole tensor when it has no layers).
std::vector<std::uint64_t> ours(const gpt2_config& cfg, tensor_id id) {
  auto s = tensor_shape(cfg, id);
  if (id == tensor_id::wte || id == tensor_id::wpe || id == tensor_id::lnfw || id == tensor_id::lnfb) return s;
  s.erase(s.begin());  // drop L
  return s;
}

// Offset of the tensor's slice for `layer` inside our buffer.
std::size_t slice_offset(const gpt2_config& cfg, const hf_tensor& t) {
  const param_layout l = make_param_layout(cfg);
  std::size_t off = l.offset(t.id);
  if (t.layer >= 0) off += l.size(t.id) / std::size_t(cfg.layers) * std::size_t(t.layer);
  return off;
}

}  // namespace

std::uint64_t hf_tensor::count() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<hf_tensor> hf_gpt2_tensors(const gpt2_config& cfg) {
  const std::uint64_t C = cfg.channels;
  std::vector<hf_tensor> out;
  out.push_back({"transformer.wte.weight", tensor_id::wte, -1, {std::uint64_t(cfg.vocab), C}, false});
  out.push_back({"transformer.wpe.weight", tensor_id::wpe, -1, {std::uint64_t(cfg.max_seq_len), C}, false});
  for (int l = 0; l < cfg.layers; ++l)
    for (const auto& b : block) {
      auto shape = ours(cfg, b.id);
      if (b.transposed) std::reverse(shape.begin(), shape.end());
      out.push_back({"transformer.h." + std::to_string(l) + "." + b.suffix, b.id, l, shape, b.transposed});
    }
  out.push_back({"transformer.ln_f.weight", tensor_id::lnfw, -1, {C}, false});
  out.push_back({"transformer.ln_f.bias", tensor_id::lnfb, -1, {C}, false});
  return out;
}

std::optional<hf_tensor> find_hf_tensor(const gpt2_config& cfg, std::string_view name) {
  for (auto& t : hf_gpt2_tensors(cfg))
    if (t.name == name) return t;
  return std::nullopt;
}

void copy_to_hf(const gpt2_config& cfg, const hf_tensor& t, std::span<const float> params, std::span<float> out) {
  const float* src = params.data() + slice_offset(cfg, t);
  if (!t.transposed) {
    std::memcpy(out.data(), src, sizeof(float) * t.count());  // wte: the first V rows
    return;
  }
  const std::uint64_t rows = t.shape[1], cols = t.shape[0];  // ours: (rows = out, cols = in)
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t c = 0; c < cols; ++c) out[c * rows + r] = src[r * cols + c];
}

void copy_from_hf(const gpt2_config& cfg, const hf_tensor& t, std::span<const float> in, std::span<float> params) {
  float* dst = params.data() + slice_offset(cfg, t);
  if (!t.transposed) {
    std::memcpy(dst, in.data(), sizeof(float) * t.count());
    if (t.id == tensor_id::wte)  // padding rows
      std::memset(dst + t.count(), 0, sizeof(float) * (std::uint64_t(cfg.padded_vocab - cfg.vocab) * cfg.channels));
    return;
  }
  const std::uint64_t rows = t.shape[1], cols = t.shape[0];
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t c = 0; c < cols; ++c) dst[r * cols + c] = in[c * rows + r];
}

}  // namespace loom::model
