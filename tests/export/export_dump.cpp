// export_dump: a tiny GPT-2 (GPT-2's real vocabulary, fixed seed) exported as
// a Hugging Face directory, and our CPU engine's logits on fixed prompts, for
// hf_gpt2_reference.py to recompute with a PyTorch GPT-2 written against HF's
// conventions. Writes
//   OUT_DIR/hf/...                  write_hf_dir's directory
//   OUT_DIR/ours.safetensors        tokens (B,T) I32 and logits (B,T,V) F32,
//                                   (the first 16 tokens of 4 fixed prompts)
// A test tool, one thread; exits 1 with a message on any error.
//
//   usage: export_dump OUT_DIR [--perturb HF_TENSOR]
// --perturb adds 0.05 to the middle element of one tensor of the exported
// model.safetensors after the export: the negative control that proves the
// PyTorch comparison sees a wrong tensor.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "libs/ckpt/safetensors.hpp"
#include "libs/export/hf_dir.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "libs/engine/model.hpp"

using namespace loom;

namespace {

constexpr float perturb_delta = 0.05f;
constexpr int seq_len = 16;  // every prompt encodes to at least this many tokens
constexpr std::uint64_t seed = 0xE1907A;

// L = 2, NH = 4, C = 64, maxT = 32, GPT-2's V = 50257 padded to 50304.
constexpr model::gpt2_config cfg{2, 4, 64, 32, 50257, 50304};

const char* const prompts[] = {
    "The quick brown fox jumps over the lazy dog, and then it doesn't stop running.",
    "EdgeLoom trains GPT-style models on edge sites; the cloud aggregates them every round.",
    "  Indented code:\n\tfor (int i = 0; i < 10; ++i) sum += i * 3.14159;\n",
    "Ünïcödé and emoji 🚀🚀 — naïve café prices: €12,50 or $13.99 (approx.)",
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "export_dump: %s\n", what.c_str());
  std::exit(1);
}

// init_random leaves biases 0 and LayerNorm weights 1, so an export that
// dropped a bias would still match; noise on every tensor makes each count.
void spread(engine::gpt2& m) {
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::normal_distribution<float> n01(0.0f, 1.0f);
  const auto& lay = m.layout();
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto id = static_cast<model::tensor_id>(i);
    float* t = m.params().data() + lay.offset(id);
    std::size_t n = lay.size(id);
    if (id == model::tensor_id::wte) n = std::size_t(cfg.vocab) * cfg.channels;  // padding rows stay 0
    const bool ln_weight = id == model::tensor_id::ln1w || id == model::tensor_id::ln2w || id == model::tensor_id::lnfw;
    for (std::size_t k = 0; k < n; ++k) {
      if (model::tensor_decays(id)) t[k] *= 5.0f;
      else t[k] += (ln_weight ? 0.2f : 0.1f) * n01(rng);
    }
  }
}

void perturb(const std::filesystem::path& file, const std::string& name) {
  auto f = ckpt::read_safetensors(file.string());
  if (!f) die(f.err().to_string());
  std::vector<std::vector<std::byte>> copies;
  std::vector<ckpt::tensor_view> views;
  bool found = false;
  for (const auto& [n, t] : f->tensors()) {
    copies.emplace_back(t.data.begin(), t.data.end());
    if (n == name) {
      float x;
      const std::size_t at = (copies.back().size() / 4 / 2) * 4;
      std::memcpy(&x, copies.back().data() + at, 4);
      x += perturb_delta;
      std::memcpy(copies.back().data() + at, &x, 4);
      found = true;
    }
    views.push_back({n, t.type, t.shape, copies.back().data(), copies.back().size()});
  }
  if (!found) die("--perturb: no tensor " + name + " in " + file.string());
  std::filesystem::remove(file);
  if (auto st = ckpt::write_safetensors(file.string(), views, f->meta()); !st) die(st.err().to_string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--perturb")) {
    std::fprintf(stderr, "usage: export_dump OUT_DIR [--perturb HF_TENSOR]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  auto bpe = tokenizer::bpe::load_gpt2();
  if (!bpe) die(bpe.err().to_string() + " (scripts/install-vocab installs GPT-2's vocabulary)");
  auto spec = tokenizer::spec_from_ranks(*bpe);
  if (!spec) die(spec.err().to_string());

  const int B = static_cast<int>(std::size(prompts));
  std::vector<std::int32_t> tokens;
  std::string texts = "[";
  for (const char* p : prompts) {
    const auto ids = bpe->encode(p);
    if (ids.size() < seq_len) die(std::string("prompt too short: ") + p);
    tokens.insert(tokens.end(), ids.begin(), ids.begin() + seq_len);
    texts += (texts.size() > 1 ? "," : "") + std::to_string(ids.size());
  }
  texts += "]";

  auto created = engine::gpt2::create(cfg, B, seq_len);
  if (!created) die(created.err().to_string());
  engine::gpt2 m = std::move(*created);
  m.init_random(seed);
  spread(m);
  if (auto st = exporter::write_hf_dir(cfg, m.params(), *spec, dir / "hf"); !st) die(st.err().to_string());
  if (argc == 4) perturb(dir / "hf" / "model.safetensors", argv[3]);

  if (auto r = m.forward(tokens); !r) die(r.err().to_string());
  // (B, T, Vp) -> (B, T, V): the padding columns are ours, not the model's.
  std::vector<float> logits;
  const auto all = m.logits();
  for (std::size_t row = 0; row < std::size_t(B) * seq_len; ++row)
    logits.insert(logits.end(), all.begin() + row * cfg.padded_vocab, all.begin() + row * cfg.padded_vocab + cfg.vocab);
  const std::vector<ckpt::tensor_view> views = {
      {"tokens", ckpt::dtype::I32, {std::uint64_t(B), seq_len}, tokens.data(), tokens.size() * 4},
      {"logits", ckpt::dtype::F32, {std::uint64_t(B), seq_len, std::uint64_t(cfg.vocab)}, logits.data(), logits.size() * 4},
  };
  if (auto st = ckpt::write_safetensors((dir / "ours.safetensors").string(), views, {{"prompt_tokens", texts}}); !st)
    die(st.err().to_string());
  std::printf("export_dump: wrote %s/hf and %s/ours.safetensors (%d prompts x %d tokens)\n", dir.c_str(), dir.c_str(), B,
              seq_len);
  return 0;
}
