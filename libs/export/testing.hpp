// Test helpers for libs/export (and tests/export): a tiny GPT-2 with a small
// hand-made byte-level tokenizer, its parameters from a seed, and a scratch
// directory. Header-only; single-threaded.
#pragma once

#include "libs/export/inputs.hpp"
#include "libs/files/temp_dir.hpp"

#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace loom::exporter::testing {

// 256 single bytes, then "th" (256), "the" (257), " the" (258); then <|endoftext|> (259).
inline tokenizer::bpe_spec tiny_tokenizer() {
  tokenizer::bpe_spec s;
  for (int b = 0; b < 256; ++b) s.tokens.emplace_back(1, static_cast<char>(b));
  s.tokens.push_back("th");
  s.tokens.push_back("the");
  s.tokens.push_back(" the");
  s.merges = {{'t', 'h'}, {256, 'e'}, {' ', 257}};
  s.specials = {std::string(end_of_text)};
  return s;
}

// L = 2, NH = 2, C as given, maxT = 16, V = 260 (tiny_tokenizer), Vp = 320.
inline model::gpt2_config tiny_config(int channels = 64) { return {2, 2, channels, 16, 260, 320}; }

// N(0, 0.1) everywhere (biases and norms too, so each tensor matters), a few
// values of ±2 so q8_0 blocks differ in scale, wte's padding rows 0.
inline std::vector<float> tiny_params(const model::gpt2_config& cfg, std::uint32_t seed) {
  const auto layout = model::make_param_layout(cfg);
  std::vector<float> p(layout.total);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.1f);
  for (auto& x : p) x = n(rng);
  for (std::size_t i = 0; i < p.size(); i += 997) p[i] = (i / 997) % 2 ? 2.0f : -2.0f;
  const std::size_t real = std::size_t(cfg.vocab) * cfg.channels;
  for (std::size_t i = real; i < layout.size(model::tensor_id::wte); ++i) p[layout.offset(model::tensor_id::wte) + i] = 0;
  return p;
}

class temp_dir : public files::temp_dir {
 public:
  temp_dir() : files::temp_dir("loom-export-test") {}
  std::filesystem::path operator/(const std::string& name) const { return std::filesystem::path(path()) / name; }
  // Names of the entries directly inside.
  std::set<std::string> entries() const {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path())) out.insert(e.path().filename().string());
    return out;
  }
};

}  // namespace loom::exporter::testing
