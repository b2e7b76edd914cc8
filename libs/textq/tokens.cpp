#include "libs/textq/tokens.hpp"

namespace loom::textq {

void to_tokens(std::string_view text, std::size_t max_bytes, std::vector<std::int32_t>& out) {
  const std::size_t n = text.size() < max_bytes ? text.size() : max_bytes;
  out.resize(n + 2);
  out[0] = boundary_token;
  for (std::size_t i = 0; i < n; ++i) out[i + 1] = static_cast<unsigned char>(text[i]);
  out[n + 1] = boundary_token;
}

}  // namespace loom::textq
