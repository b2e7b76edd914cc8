#include "libs/export/gguf_gpt2.hpp"

#include <algorithm>

namespace loom::exporter {
namespace {

using model::tensor_id;

// llama.cpp's LLAMA_TOKEN_TYPE values for tokenizer.ggml.token_type.
constexpr std::int32_t token_normal = 1, token_control = 3;
// ggml's LLAMA_FTYPE (general.file_type) for each file type.
std::uint32_t file_type(gguf_type t) {
  switch (t) {
    case gguf_type::f32: return 0;   // ALL_F32
    case gguf_type::f16: return 1;   // MOSTLY_F16
    case gguf_type::q8_0: return 7;  // MOSTLY_Q8_0
  }
  return 0;
}
constexpr std::uint32_t quantization_version = 2;  // GGML_QNT_VERSION

struct per_layer {
  tensor_id id;
  const char* suffix;
};
// HF's order inside a block, in llama.cpp's names.
constexpr per_layer block[] = {
    {tensor_id::ln1w, "attn_norm.weight"},     {tensor_id::ln1b, "attn_norm.bias"},
    {tensor_id::qkvw, "attn_qkv.weight"},      {tensor_id::qkvb, "attn_qkv.bias"},
    {tensor_id::attprojw, "attn_output.weight"}, {tensor_id::attprojb, "attn_output.bias"},
    {tensor_id::ln2w, "ffn_norm.weight"},      {tensor_id::ln2b, "ffn_norm.bias"},
    {tensor_id::fcw, "ffn_up.weight"},         {tensor_id::fcb, "ffn_up.bias"},
    {tensor_id::fcprojw, "ffn_down.weight"},   {tensor_id::fcprojb, "ffn_down.bias"},
};

gguf_gpt2_tensor make(const model::gpt2_config& cfg, std::string name, tensor_id id, int layer, gguf_type type) {
  auto shape = model::tensor_shape(cfg, id);
  if (layer >= 0) shape.erase(shape.begin());
  if (id == tensor_id::wte) shape[0] = std::uint64_t(cfg.vocab);  // real rows only
  std::reverse(shape.begin(), shape.end());                      // ne[0] innermost
  gguf_type t = type;
  if (shape.size() == 1 || id == tensor_id::wpe) t = gguf_type::f32;
  if (t == gguf_type::q8_0 && shape[0] % 32 != 0) t = gguf_type::f16;
  return {std::move(name), std::move(shape), t, id, layer};
}

}  // namespace

std::vector<gguf_gpt2_tensor> gguf_gpt2_tensors(const model::gpt2_config& cfg, gguf_type type) {
  std::vector<gguf_gpt2_tensor> out;
  out.push_back(make(cfg, "token_embd.weight", tensor_id::wte, -1, type));
  out.push_back(make(cfg, "position_embd.weight", tensor_id::wpe, -1, type));
  for (int l = 0; l < cfg.layers; ++l)
    for (const auto& b : block) out.push_back(make(cfg, "blk." + std::to_string(l) + "." + b.suffix, b.id, l, type));
  out.push_back(make(cfg, "output_norm.weight", tensor_id::lnfw, -1, type));
  out.push_back(make(cfg, "output_norm.bias", tensor_id::lnfb, -1, type));
  return out;
}

std::vector<gguf_kv> gguf_gpt2_metadata(const model::gpt2_config& cfg, const tokenizer::bpe_spec& tok,
                                        std::uint32_t eot, gguf_type type, const std::string& name) {
  const auto u32 = [](auto v) { return gguf_value::u32(static_cast<std::uint32_t>(v)); };
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  tokens.reserve(tok.tokens.size() + tok.specials.size());
  for (const auto& t : tok.tokens) {
    tokens.push_back(tokenizer::to_byte_level(t));
    types.push_back(token_normal);
  }
  for (const auto& s : tok.specials) {
    tokens.push_back(s);
    types.push_back(token_control);
  }
  std::vector<std::string> merges;
  merges.reserve(tok.merges.size());
  for (const auto& m : tok.merges)
    merges.push_back(tokenizer::to_byte_level(tok.tokens[m.left]) + " " + tokenizer::to_byte_level(tok.tokens[m.right]));
  return {
      {"general.architecture", gguf_value::string("gpt2")},
      {"general.name", gguf_value::string(name)},
      {"general.file_type", u32(file_type(type))},
      {"general.quantization_version", u32(quantization_version)},
      {"general.alignment", u32(32)},
      {"gpt2.context_length", u32(cfg.max_seq_len)},
      {"gpt2.embedding_length", u32(cfg.channels)},
      {"gpt2.feed_forward_length", u32(4 * cfg.channels)},
      {"gpt2.block_count", u32(cfg.layers)},
      {"gpt2.attention.head_count", u32(cfg.heads)},
      {"gpt2.attention.layer_norm_epsilon", gguf_value::f32(1e-5f)},
      {"tokenizer.ggml.model", gguf_value::string("gpt2")},
      {"tokenizer.ggml.pre", gguf_value::string("gpt-2")},
      {"tokenizer.ggml.tokens", gguf_value::string_array(std::move(tokens))},
      {"tokenizer.ggml.token_type", gguf_value::i32_array(std::move(types))},
      {"tokenizer.ggml.merges", gguf_value::string_array(std::move(merges))},
      {"tokenizer.ggml.bos_token_id", u32(eot)},
      {"tokenizer.ggml.eos_token_id", u32(eot)},
  };
}

status write_gguf(const model::gpt2_config& cfg, std::span<const float> params, const tokenizer::bpe_spec& tok,
                  gguf_type type, const std::filesystem::path& out, const gguf_options& options) {
  auto eot = check_inputs(cfg, params, tok);
  if (!eot) return eot.err();
  const auto kv = gguf_gpt2_metadata(cfg, tok, *eot, type, options.name);
  std::vector<gguf_tensor_in> tensors;
  for (auto& t : gguf_gpt2_tensors(cfg, type))
    tensors.push_back({t.name, t.ne, t.type, tensor_slice(cfg, params, t.id, t.layer)});
  return write_gguf_file(out, kv, tensors, options.fault);
}

}  // namespace loom::exporter
