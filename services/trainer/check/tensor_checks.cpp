#include "services/trainer/check/tensor_checks.hpp"

#include <cmath>
#include <cstring>
#include <set>

namespace loom::modelcheck {
namespace {

std::string dims(const std::vector<std::uint64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::vector<std::string> non_finite(const ckpt::safetensors_file& f) {
  std::vector<std::string> out;
  for (const auto& [name, t] : f.tensors()) {
    if (t.type != ckpt::dtype::F32) continue;
    const std::size_t n = t.data.size() / sizeof(float);
    std::size_t bad = 0, first = 0;
    float first_value = 0;
    for (std::size_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, t.data.data() + i * sizeof(float), sizeof x);  // the data may be unaligned
      if (!std::isfinite(x)) {
        if (bad++ == 0) first = i, first_value = x;
      }
    }
    if (bad)
      out.push_back("tensor " + name + ": " + (std::isnan(first_value) ? "NaN" : first_value > 0 ? "+Inf" : "-Inf") +
                    " at index " + std::to_string(first) + " (" + std::to_string(bad) + " non-finite value" +
                    (bad == 1 ? "" : "s") + ")");
  }
  return out;
}

std::vector<std::string> shape_problems(const ckpt::safetensors_file& f, const model::gpt2_config& cfg) {
  std::vector<std::string> out;
  std::set<std::string> expected;
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto id = static_cast<model::tensor_id>(i);
    const std::string name(model::tensor_name(id));
    expected.insert(name);
    const auto want = model::tensor_shape(cfg, id);
    const ckpt::tensor_info* t = f.find(name);
    if (!t) {
      out.push_back("tensor " + name + " is missing (want F32 " + dims(want) + ")");
      continue;
    }
    if (t->type != ckpt::dtype::F32) out.push_back("tensor " + name + " is not F32");
    if (t->shape != want) out.push_back("tensor " + name + " has shape " + dims(t->shape) + ", the config says " + dims(want));
  }
  for (const auto& [name, t] : f.tensors())
    if (!expected.count(name)) out.push_back("tensor " + name + " " + dims(t.shape) + " is not a GPT-2 tensor");
  return out;
}

std::vector<std::string> config_differences(const model::gpt2_config& a, const model::gpt2_config& b) {
  std::vector<std::string> out;
  for (auto [k, x, y] : {std::tuple{"layers", a.layers, b.layers}, {"heads", a.heads, b.heads},
                         {"channels", a.channels, b.channels}, {"max_seq_len", a.max_seq_len, b.max_seq_len},
                         {"vocab", a.vocab, b.vocab}, {"padded_vocab", a.padded_vocab, b.padded_vocab}})
    if (x != y)
      out.push_back(std::string("model.") + k + " " + std::to_string(x) + " (checkpoint) vs " + std::to_string(y) +
                    " (the version's config)");
  return out;
}

}  // namespace loom::modelcheck
