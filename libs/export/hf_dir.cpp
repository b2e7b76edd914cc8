#include "libs/export/hf_dir.hpp"

#include "libs/ckpt/safetensors.hpp"
#include "libs/export/staging.hpp"
#include "libs/files/files.hpp"
#include "libs/model/hf_names.hpp"

#include <nlohmann/json.hpp>

#include <vector>

namespace loom::exporter {
namespace {

using ojson = nlohmann::ordered_json;

status write_text(const std::filesystem::path& path, const std::string& text) {
  return files::write_atomic(path.string(), text);
}

// model.safetensors: tensors HF stores as we do point into `params`; the
// transposed (Conv1D) ones are copied.
status write_weights(const model::gpt2_config& cfg, std::span<const float> params, const std::filesystem::path& path) {
  const auto hf = model::hf_gpt2_tensors(cfg);
  std::size_t copied = 0;
  for (const auto& t : hf)
    if (t.transposed) copied += t.count();
  std::vector<float> scratch(copied);
  std::vector<ckpt::tensor_view> views;
  std::size_t at = 0;
  for (const auto& t : hf) {
    std::span<const float> v = tensor_slice(cfg, params, t.id, t.layer);
    if (t.transposed) {
      std::span<float> dst(scratch.data() + at, t.count());
      model::copy_to_hf(cfg, t, params, dst);
      v = dst;
      at += t.count();
    }
    views.push_back({t.name, ckpt::dtype::F32, t.shape, v.data(), v.size() * sizeof(float)});
  }
  return ckpt::write_safetensors(path.string(), views, {{"format", "pt"}});
}

}  // namespace

std::string hf_config_json(const model::gpt2_config& cfg, std::uint32_t eot) {
  // HF's GPT-2 keys. Dropouts are 0: we train without dropout, so fine-tuning
  // elsewhere starts from the same function.
  ojson j;
  j["activation_function"] = "gelu_new";  // tanh-approximated GELU, the engine's
  j["architectures"] = {"GPT2LMHeadModel"};
  j["attn_pdrop"] = 0.0;
  j["bos_token_id"] = eot;
  j["embd_pdrop"] = 0.0;
  j["eos_token_id"] = eot;
  j["initializer_range"] = 0.02;
  j["layer_norm_epsilon"] = 1e-05;
  j["model_type"] = "gpt2";
  j["n_ctx"] = cfg.max_seq_len;
  j["n_embd"] = cfg.channels;
  j["n_head"] = cfg.heads;
  j["n_inner"] = nullptr;  // 4 * n_embd
  j["n_layer"] = cfg.layers;
  j["n_positions"] = cfg.max_seq_len;
  j["reorder_and_upcast_attn"] = false;
  j["resid_pdrop"] = 0.0;
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["scale_attn_weights"] = true;
  j["tie_word_embeddings"] = true;
  j["torch_dtype"] = "float32";
  j["use_cache"] = true;
  j["vocab_size"] = cfg.vocab;  // the real vocabulary: our padding rows are not exported
  return j.dump(2) + "\n";
}

std::string hf_generation_config_json(std::uint32_t eot) {
  ojson j;
  j["_from_model_config"] = true;
  j["bos_token_id"] = eot;
  j["eos_token_id"] = eot;
  return j.dump(2) + "\n";
}

std::string hf_tokenizer_config_json(const model::gpt2_config& cfg) {
  ojson j;
  j["add_bos_token"] = false;
  j["add_prefix_space"] = false;
  j["bos_token"] = std::string(end_of_text);
  j["clean_up_tokenization_spaces"] = false;
  j["eos_token"] = std::string(end_of_text);
  j["model_max_length"] = cfg.max_seq_len;
  j["tokenizer_class"] = "GPT2Tokenizer";
  j["unk_token"] = std::string(end_of_text);
  return j.dump(2) + "\n";
}

std::string hf_tokenizer_json(const tokenizer::bpe_spec& tok) {
  std::string text = tokenizer::to_hf_json(tok);
  // to_hf_json writes "post_processor": null; GPT-2's file has ByteLevel
  // (offsets only: ids are the same). A text edit, not a JSON round trip: an
  // ordered JSON object of 50k keys parses in quadratic time.
  static constexpr std::string_view null_pp = "\n  \"post_processor\": null,\n";
  static constexpr std::string_view byte_level_pp =
      "\n  \"post_processor\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": true,\n"
      "    \"trim_offsets\": false,\n    \"use_regex\": true\n  },\n";
  if (const auto at = text.find(null_pp); at != std::string::npos) text.replace(at, null_pp.size(), byte_level_pp);
  return text;
}

status write_hf_dir(const model::gpt2_config& cfg, std::span<const float> params, const tokenizer::bpe_spec& tok,
                    const std::filesystem::path& out, const hf_options& options) {
  auto eot = check_inputs(cfg, params, tok);
  if (!eot) return eot.err();
  std::string tokenizer_json;
  try {
    tokenizer_json = hf_tokenizer_json(tok);
  } catch (const nlohmann::json::exception& e) {  // a special token that is not UTF-8
    return make_error(errc::invalid_argument, std::string("export: the tokenizer cannot be written as JSON: ") + e.what());
  }
  auto dir = staged_dir::create(out);
  if (!dir) return dir.err();
  const auto step = [&](std::string_view file, const std::function<status(const std::filesystem::path&)>& write) {
    if (options.fault)
      if (auto st = options.fault(file); !st) return st;
    return write(dir->path() / file);
  };
  const std::pair<std::string_view, std::function<status(const std::filesystem::path&)>> files_in_order[] = {
      {"config.json", [&](const auto& p) { return write_text(p, hf_config_json(cfg, *eot)); }},
      {"generation_config.json", [&](const auto& p) { return write_text(p, hf_generation_config_json(*eot)); }},
      {"tokenizer.json", [&](const auto& p) { return write_text(p, tokenizer_json); }},
      {"tokenizer_config.json", [&](const auto& p) { return write_text(p, hf_tokenizer_config_json(cfg)); }},
      {"model.safetensors", [&](const auto& p) { return write_weights(cfg, params, p); }},
  };
  for (const auto& [file, write] : files_in_order)
    if (auto st = step(file, write); !st) return st;
  return dir->commit();
}

}  // namespace loom::exporter
