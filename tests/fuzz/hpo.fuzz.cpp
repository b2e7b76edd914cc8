// Fuzzes the [hpo] search-space parser (libs/hpo/hpo_spec.hpp, parse_hpo) and
// the trials it expands to: an hpo stage's [hpo] and [hpo.space] tables come
// in the template a submitter sends. A spec that parses must expand to trials
// (or refuse with an error), never crash or run away.
#include "libs/hpo/hpo_spec.hpp"

#include <string_view>

using namespace loom::hpo;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = parse_hpo(text, "/fuzz/hpo.toml");
  if (!spec.ok()) return 0;
  (void)spec->trial_configs();
  return 0;
}
