#include "libs/model/gpt_config.hpp"

#include <string>

namespace loom::model {

status gpt2_config::validate() const {
  auto bad = [](std::string what) { return make_error(errc::invalid_argument, "gpt2_config: " + what); };
  if (layers < 1) return bad("layers must be >= 1");
  if (heads < 1) return bad("heads must be >= 1");
  if (channels < 1 || channels % heads != 0) return bad("channels must be a positive multiple of heads");
  if (max_seq_len < 1) return bad("max_seq_len must be >= 1");
  if (vocab < 1) return bad("vocab must be >= 1");
  if (padded_vocab < vocab) return bad("padded_vocab must be >= vocab");
  return ok_status();
}

std::string_view tensor_name(tensor_id t) {
  static constexpr std::array<std::string_view, num_tensors> names{
      "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
      "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
  return names[static_cast<int>(t)];
}

std::vector<std::uint64_t> tensor_shape(const gpt2_config& c, tensor_id t) {
  const std::uint64_t L = c.layers, C = c.channels;
  switch (t) {
    case tensor_id::wte: return {std::uint64_t(c.padded_vocab), C};
    case tensor_id::wpe: return {std::uint64_t(c.max_seq_len), C};
    case tensor_id::qkvw: return {L, 3 * C, C};
    case tensor_id::qkvb: return {L, 3 * C};
    case tensor_id::attprojw: return {L, C, C};
    case tensor_id::fcw: return {L, 4 * C, C};
    case tensor_id::fcb: return {L, 4 * C};
    case tensor_id::fcprojw: return {L, C, 4 * C};
    case tensor_id::lnfw: case tensor_id::lnfb: return {C};
    default: return {L, C};  // ln1w ln1b attprojb ln2w ln2b fcprojb
  }
}

bool tensor_decays(tensor_id t) {
  switch (t) {
    case tensor_id::wte: case tensor_id::wpe: case tensor_id::qkvw:
    case tensor_id::attprojw: case tensor_id::fcw: case tensor_id::fcprojw:
      return true;
    default:
      return false;
  }
}

std::vector<param_range> param_layout::ranges() const {
  std::vector<param_range> out;
  for (int i = 0; i < num_tensors; ++i)
    out.push_back({offsets[i], sizes[i], tensor_decays(static_cast<tensor_id>(i))});
  return out;
}

param_layout make_param_layout(const gpt2_config& cfg) {
  const std::size_t L = cfg.layers, C = cfg.channels;
  param_layout p;
  p.sizes = {std::size_t(cfg.padded_vocab) * C, std::size_t(cfg.max_seq_len) * C,
             L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
             L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C,
             C, C};
  for (int i = 0; i < num_tensors; ++i) {
    p.offsets[i] = p.total;
    p.total += p.sizes[i];
  }
  return p;
}

tensor_views make_views(float* base, const param_layout& l) {
  auto at = [&](tensor_id t) { return base + l.offset(t); };
  using T = tensor_id;
  return {at(T::wte), at(T::wpe), at(T::ln1w), at(T::ln1b), at(T::qkvw), at(T::qkvb),
          at(T::attprojw), at(T::attprojb), at(T::ln2w), at(T::ln2b), at(T::fcw), at(T::fcb),
          at(T::fcprojw), at(T::fcprojb), at(T::lnfw), at(T::lnfb)};
}

}  // namespace loom::model
