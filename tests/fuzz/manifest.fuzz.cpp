// Fuzzes the shard directory's manifest.json parser (libs/shards/manifest.hpp)
// and the loader's cursor JSON (libs/shards/loader.hpp): a manifest arrives
// with every dataset a site syncs from another, and both are read back from
// disk where anything may have been written. A manifest that parses must
// survive to_json -> parse_manifest unchanged.
#include "libs/shards/loader.hpp"
#include "libs/shards/manifest.hpp"

#include <cstdlib>
#include <string_view>

using namespace loom::shards;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)cursor_from_json(text);
  auto m = parse_manifest(text, "fuzz/manifest.json");
  if (!m.ok()) return 0;
  auto again = parse_manifest(to_json(*m), "fuzz/again.json");
  if (!again.ok() || again->shards.size() != m->shards.size()) std::abort();
  for (std::size_t i = 0; i < m->shards.size(); ++i) {
    const auto &a = m->shards[i], &b = again->shards[i];
    if (a.name != b.name || a.sha256 != b.sha256 || a.bytes != b.bytes || a.tokens != b.tokens ||
        a.docs != b.docs || a.type != b.type || a.node != b.node)
      std::abort();
  }
  (void)m->total_tokens();
  return 0;
}
