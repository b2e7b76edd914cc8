// A GPT-2 as a Hugging Face model directory that transformers loads with
// GPT2LMHeadModel.from_pretrained and AutoTokenizer.from_pretrained:
//   config.json             GPT2LMHeadModel, gelu_new, tied embeddings, float32
//   generation_config.json  bos/eos = <|endoftext|>
//   model.safetensors       HF's names and layouts (libs/model/hf_names.hpp:
//                           Conv1D weights (in, out), wte without our padding
//                           rows, no lm_head: tied), metadata format = pt
//   tokenizer.json          HF tokenizers' byte-level BPE (vocab + merges,
//                           ByteLevel pre-tokenizer, post-processor, decoder)
//   tokenizer_config.json   GPT2Tokenizer, its special tokens, model_max_length
// Pure functions plus one writer; any thread.
#pragma once

#include "libs/export/inputs.hpp"

#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace loom::exporter {

// The files' contents. `eot` is <|endoftext|>'s id (check_inputs).
std::string hf_config_json(const model::gpt2_config& cfg, std::uint32_t eot);
std::string hf_generation_config_json(std::uint32_t eot);
std::string hf_tokenizer_config_json(const model::gpt2_config& cfg);
// libs/tokenizer's tokenizer.json with GPT-2's ByteLevel post-processor.
std::string hf_tokenizer_json(const tokenizer::bpe_spec& tok);

struct hf_options {
  // Test hook: called with each file's name before it is written; an error it
  // returns fails the export there (as a full disk would).
  std::function<status(std::string_view file)> fault;
};

// Writes the directory at `out`: into a temp directory beside it, every file
// fsynced, then renamed into place. `out` may be absent or an empty
// directory; anything else is refused with already_exists. On any error the
// temp directory is removed and `out` is as it was. invalid_argument from
// check_inputs.
status write_hf_dir(const model::gpt2_config& cfg, std::span<const float> params, const tokenizer::bpe_spec& tok,
                    const std::filesystem::path& out, const hf_options& options = {});

}  // namespace loom::exporter
