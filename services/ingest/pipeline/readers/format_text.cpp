// Plain text, Markdown and HTML readers: bytes -> lines -> doc_builder.
#include "services/ingest/pipeline/readers/doc_builder.hpp"
#include "services/ingest/pipeline/readers/html_text.hpp"
#include "services/ingest/pipeline/readers/line_loop.hpp"
#include "services/ingest/pipeline/readers/markdown_text.hpp"
#include "services/ingest/pipeline/utf8.hpp"

#include <vector>

namespace loom::ingest::detail {

void read_text(read_context& ctx, const std::string& name, byte_source& src) {
  doc_builder b(ctx, name);
  // A stream that fails mid-way loses only the document it was in: documents
  // already complete were emitted; the partial one is dropped with the rejection.
  if (for_each_line(ctx, name, src, [&](std::string_view line, std::uint64_t n) { return b.add_line(line, n); }))
    b.flush();
}

void read_markdown(read_context& ctx, const std::string& name, byte_source& src) {
  doc_builder b(ctx, name);
  markdown_to_text md;
  std::string out;
  bool ok = for_each_line(ctx, name, src, [&](std::string_view line, std::uint64_t n) {
    out.clear();
    md.line(line, out);
    if (out.empty()) return !ctx.stopped;
    out.pop_back();  // the '\n' markdown_to_text adds
    return b.add_line(out, n);
  });
  if (ok) b.flush();
}

void read_html(read_context& ctx, const std::string& name, byte_source& src) {
  doc_builder b(ctx, name);
  html_to_text conv;
  std::vector<char> buf(64 * 1024);
  std::string out;
  // Hands complete lines of `out` to the builder; a line longer than the line
  // limit (a huge paragraph without markup) is wrapped there, keeping memory bounded.
  auto drain = [&](bool all) {
    std::size_t start = 0;
    for (;;) {
      std::size_t nl = out.find('\n', start);
      if (nl == std::string::npos) break;
      if (!b.add_line(std::string_view(out).substr(start, nl - start), 0)) return false;
      start = nl + 1;
    }
    out.erase(0, start);
    while (out.size() > ctx.opt.max_line_bytes || (all && !out.empty())) {
      std::string_view piece = utf8::truncate(out, std::min(out.size(), ctx.opt.max_line_bytes));
      if (piece.empty()) piece = std::string_view(out).substr(0, std::min(out.size(), ctx.opt.max_line_bytes));
      if (!b.add_line(piece, 0)) return false;
      out.erase(0, piece.size());
    }
    return true;
  };
  for (;;) {
    auto r = src.read(buf.data(), buf.size());
    if (!r.ok()) {
      reject_stream_error(ctx, name, 0, src, r.err());
      return;
    }
    if (*r == 0) break;
    conv.feed(std::string_view(buf.data(), *r), out);
    if (!drain(false)) return;
  }
  conv.finish(out);
  if (drain(true)) b.flush();
}

}  // namespace loom::ingest::detail
