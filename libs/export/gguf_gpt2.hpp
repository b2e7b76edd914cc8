// A GPT-2 as llama.cpp's `gpt2` architecture in GGUF: the metadata keys
// llama.cpp reads (gpt2.*, tokenizer.ggml.*), the tensor names and shapes it
// loads (llama.cpp src/models/gpt2.cpp), and the writer. Our linear weights
// are (out, in) row-major, which is ggml's {ne0 = in, ne1 = out}: no
// transposes. The output head is tied (no output.weight: llama.cpp then uses
// token_embd). Pure functions; any thread.
#pragma once

#include "libs/export/gguf.hpp"
#include "libs/export/inputs.hpp"

#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace loom::exporter {

// One tensor of the file and where its values come from in our buffer.
struct gguf_gpt2_tensor {
  std::string name;               // e.g. "blk.3.attn_qkv.weight"
  std::vector<std::uint64_t> ne;  // GGUF order, ne[0] innermost
  gguf_type type = gguf_type::f32;
  model::tensor_id id = model::tensor_id::wte;
  int layer = -1;                 // -1 for token_embd, position_embd, output_norm
};

// Every tensor, in file order (token_embd, position_embd, blk.0 ... blk.L-1,
// output_norm), with the type each gets in a file of `type`: as llama.cpp's
// converter does, 1-D tensors (norms, biases) and position_embd stay f32, and
// a q8_0 matrix whose rows are not whole blocks of 32 falls back to f16.
std::vector<gguf_gpt2_tensor> gguf_gpt2_tensors(const model::gpt2_config& cfg, gguf_type type);

// The metadata, in file order. `eot` is <|endoftext|>'s id (check_inputs).
std::vector<gguf_kv> gguf_gpt2_metadata(const model::gpt2_config& cfg, const tokenizer::bpe_spec& tok,
                                        std::uint32_t eot, gguf_type type, const std::string& name);

struct gguf_options {
  std::string name = "edgeloom-gpt2";  // general.name
  gguf_fault fault;                    // test hook (gguf.hpp)
};

// Writes the model as one GGUF file at `out` (atomically; an existing path is
// refused with already_exists). invalid_argument from check_inputs, or for a
// parameter the type cannot hold (non-finite, or beyond f16's range).
status write_gguf(const model::gpt2_config& cfg, std::span<const float> params, const tokenizer::bpe_spec& tok,
                  gguf_type type, const std::filesystem::path& out, const gguf_options& options = {});

}  // namespace loom::exporter
