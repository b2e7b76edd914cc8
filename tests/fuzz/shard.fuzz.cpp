// Fuzzes the token-shard reader (libs/shards/reader.hpp): a trainer maps
// shard files fetched from other sites (data sync) and from its dataset
// directory, so the header's counts and offsets and the document index are
// outside input. shard_reader::open only takes a path: the input is written
// to a tmpfs file first. Whatever opens must serve every document in range.
#include "libs/shards/reader.hpp"
#include "tests/fuzz/fuzz_file.hpp"

#include <cstdlib>
#include <vector>

using namespace loom::shards;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto path = loom::fuzz::write_file(loom::fuzz::scratch_dir("shard"), "shard-000001.bin", data, size);
  auto r = shard_reader::open(path);
  if (!r.ok()) return 0;
  std::vector<std::uint32_t> buf(r->token_count());
  std::uint64_t total = 0;
  for (std::uint64_t k = 0; k < r->doc_count(); ++k) {
    auto doc = r->document(k, buf);
    if (!doc.ok() || doc->size() != r->document_size(k)) std::abort();
    total += doc->size();
  }
  if (total != (r->doc_count() ? r->token_count() : total)) std::abort();
  if (!r->tokens(0, r->token_count(), buf).ok()) std::abort();
  if (r->tokens(r->token_count(), 1, buf).ok()) std::abort();  // one past the end
  return 0;
}
