// Fuzzes the ingest readers (services/ingest/pipeline/readers/reader.hpp,
// read_stream): `loom data import` feeds them whatever files a site points it
// at -- text, Markdown, HTML, JSONL (text, chat and preference records),
// CSV/TSV, tar archives, gzip and zstd streams -- so every byte is outside
// input. Byte 0 picks the file name (hence the reader) and the split mode;
// the rest is the file. Every document must respect the size limits and a
// record's counters must add up.
#include "services/ingest/pipeline/readers/reader.hpp"

#include <cstdlib>
#include <iterator>
#include <string_view>

using namespace loom::ingest;

namespace {

constexpr const char* names[] = {
    "f.txt", "f.md", "f.html", "f.jsonl", "f.csv", "f.tsv", "f.tar", "f.txt.gz",
    "f.jsonl.zst", "f.csv.gz", "f.tar.gz", "f", "f.bin", "f.htm", "f.markdown", "f.tsv.zst",
};
// Small limits so the size-limit paths (line_too_long, document splitting)
// are reachable with short inputs; the product's are 16 MiB.
constexpr std::size_t max_line = 4096, max_doc = 2048;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  reader_options opt;
  opt.extensions = default_extensions();
  opt.max_line_bytes = max_line;
  opt.max_document_bytes = max_doc;
  opt.split = static_cast<text_split>((data[0] >> 4) % 3);
  opt.csv_header = (data[0] & 0x80) == 0;
  std::string name = names[data[0] % std::size(names)];
  auto src = make_memory_source(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  std::uint64_t docs = 0, rejects = 0;
  read_callbacks cb;
  cb.on_document = [&](document& d) {
    ++docs;
    if (d.kind == doc_kind::text && d.text.size() > max_doc) std::abort();
    return docs < 10000;  // a runaway split is caught by the timeout first
  };
  cb.on_reject = [&](const rejection&) { ++rejects; };
  auto stats = read_stream(name, *src, opt, cb);
  if (stats.documents != docs || stats.rejections != rejects) std::abort();
  return 0;
}
