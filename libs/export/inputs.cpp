#include "libs/export/inputs.hpp"

#include <string>

namespace loom::exporter {

result<std::uint32_t> check_inputs(const model::gpt2_config& cfg, std::span<const float> params,
                                   const tokenizer::bpe_spec& tok) {
  if (auto st = cfg.validate(); !st) return st.err();
  const auto bad = [](const std::string& what) { return make_error(errc::invalid_argument, "export: " + what); };
  const std::size_t want = model::make_param_layout(cfg).total;
  if (params.size() != want)
    return bad("the parameter buffer holds " + std::to_string(params.size()) + " floats, the config needs " +
               std::to_string(want));
  const std::size_t n = tok.tokens.size() + tok.specials.size();
  if (n != static_cast<std::size_t>(cfg.vocab))
    return bad("the tokenizer has " + std::to_string(n) + " tokens (" + std::to_string(tok.tokens.size()) +
               " ordinary, " + std::to_string(tok.specials.size()) + " special), the model's vocab is " +
               std::to_string(cfg.vocab));
  for (std::size_t i = 0; i < tok.merges.size(); ++i)
    if (tok.merges[i].left >= tok.tokens.size() || tok.merges[i].right >= tok.tokens.size())
      return bad("tokenizer merge " + std::to_string(i) + " names a token id past the vocabulary");
  for (std::size_t i = 0; i < tok.specials.size(); ++i)
    if (tok.specials[i] == end_of_text) return static_cast<std::uint32_t>(tok.tokens.size() + i);
  return bad("the tokenizer has no special token " + std::string(end_of_text) + " (GPT-2's bos and eos)");
}

std::span<const float> tensor_slice(const model::gpt2_config& cfg, std::span<const float> params,
                                    model::tensor_id id, int layer) {
  const model::param_layout l = model::make_param_layout(cfg);
  if (id == model::tensor_id::wte) return params.subspan(l.offset(id), std::size_t(cfg.vocab) * cfg.channels);
  if (layer < 0) return params.subspan(l.offset(id), l.size(id));
  const std::size_t per_layer = l.size(id) / std::size_t(cfg.layers);
  return params.subspan(l.offset(id) + per_layer * std::size_t(layer), per_layer);
}

}  // namespace loom::exporter
