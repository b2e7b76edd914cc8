// Entry points of the readers: paths, directories, and the dispatch of one named
// stream to its format reader (after decompression and binary sniffing).
#include "services/ingest/pipeline/readers/reader.hpp"

#include "libs/files/confine.hpp"
#include "services/ingest/pipeline/readers/read_context.hpp"
#include "services/ingest/pipeline/readers/sniff.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

namespace loom::ingest {
namespace fs = std::filesystem;

namespace detail {

void reject_stream_error(read_context& ctx, const std::string& name, std::uint64_t line, const byte_source& src,
                         const error& e) {
  ctx.reject(name, line, src.failure_reason(), e.message);
}

void read_named(read_context& ctx, const std::string& name, byte_source& src, int depth) {
  ++ctx.stats.files;
  const name_format nf = format_for_name(name, ctx.opt);
  if (nf.format == source_format::unknown) {
    ctx.reject(name, 0, reject_reason::unknown_format, "no reader for this file name's extension");
    return;
  }
  if (nf.format == source_format::archive) {
    if (depth >= ctx.opt.max_archive_depth) {
      ctx.reject(name, 0, reject_reason::archive_too_deep,
                 "archive nested " + std::to_string(depth) + " deep; the limit is " +
                     std::to_string(ctx.opt.max_archive_depth));
      return;
    }
    read_archive(ctx, name, src, depth);
    return;
  }

  std::unique_ptr<byte_source> outer_decoder, sniffed_decoder;
  byte_source* s = &src;
  if (nf.comp != compression::none) {
    outer_decoder = make_decompressor(nf.comp, src);
    s = outer_decoder.get();
  }
  if (nf.format == source_format::image || nf.format == source_format::audio) {
    read_media(ctx, name, *s, nf.format);
    return;
  }
  auto peek = std::make_unique<peek_source>(*s);
  auto head = peek->peek(ctx.opt.sniff_bytes);
  // Compressed content under a name that does not say so ("notes" holding gzip).
  std::unique_ptr<peek_source> inner_peek;
  if (head.ok() && nf.comp == compression::none) {
    compression c = compression_from_magic(*head);
    if (c != compression::none) {
      sniffed_decoder = make_decompressor(c, *peek);
      inner_peek = std::make_unique<peek_source>(*sniffed_decoder);
      head = inner_peek->peek(ctx.opt.sniff_bytes);
    }
  }
  peek_source& p = inner_peek ? *inner_peek : *peek;
  if (!head.ok()) {
    reject_stream_error(ctx, name, 0, p, head.err());
    return;
  }
  if (auto why = binary_reason(*head, ctx.opt.max_control_ratio)) {
    ctx.reject(name, 0, reject_reason::binary_content, "binary content: " + *why);
    return;
  }
  const auto docs_before = ctx.stats.documents, rejects_before = ctx.stats.rejections;
  switch (nf.format) {
    case source_format::text: read_text(ctx, name, p); break;
    case source_format::markdown: read_markdown(ctx, name, p); break;
    case source_format::html: read_html(ctx, name, p); break;
    case source_format::jsonl: read_jsonl(ctx, name, p); break;
    case source_format::csv: read_csv(ctx, name, p, ','); break;
    case source_format::tsv: read_csv(ctx, name, p, '\t'); break;
    case source_format::archive:
    case source_format::image:
    case source_format::audio:
    case source_format::unknown: break;
  }
  ctx.stats.bytes_decoded += p.bytes();
  if (!ctx.stopped && ctx.stats.documents == docs_before && ctx.stats.rejections == rejects_before)
    ctx.reject(name, 0, reject_reason::empty_file, "no text in " + std::to_string(p.bytes()) + " bytes");
}

void read_media(read_context& ctx, const std::string& name, byte_source& src, source_format kind) {
  if (!ctx.cb.on_media) {
    ctx.reject(name, 0, reject_reason::unknown_format, "no reader for this file name's extension");
    return;
  }
  // Whole, bounded: a codec needs the file in one piece, and the limit is
  // checked while reading (a member of a stream has no size to stat first).
  media_file m{name, kind, {}};
  const std::uint64_t cap = ctx.opt.max_media_bytes;
  char buf[64 * 1024];
  for (;;) {
    auto n = src.read(buf, sizeof buf);
    if (!n) {
      reject_stream_error(ctx, name, 0, src, n.err());
      return;
    }
    if (*n == 0) break;
    if (m.bytes.size() + *n > cap) {
      ctx.reject(name, 0, reject_reason::media_too_large,
                 "over " + std::to_string(cap) + " bytes (the media size limit); not read");
      return;
    }
    m.bytes.append(buf, *n);
  }
  ctx.stats.bytes_decoded += m.bytes.size();
  if (ctx.stopped) return;
  if (!ctx.cb.on_media(m)) ctx.stopped = true;
}

}  // namespace detail

namespace {

void read_entry(detail::read_context& ctx, const fs::path& path);

// With roots: false and an outside_roots rejection when `path` leads
// outside them (a link out is named with where it leads). Other failures
// (a broken link, say) are left to the caller's own checks.
bool inside_roots(detail::read_context& ctx, const std::string& path) {
  if (ctx.opt.roots.empty()) return true;
  auto c = files::confined(ctx.opt.roots, path);
  if (c || c.code() != errc::permission_denied) return true;
  ctx.reject(path, 0, reject_reason::outside_roots, c.err().message + "; not read");
  return false;
}

void read_file(detail::read_context& ctx, const std::string& path) {
  // Opened inside the roots only, checked again after the open (a directory
  // on the way swapped for a link since read_entry looked).
  auto src = open_file_source(path, ctx.opt.roots);
  if (!src.ok()) {
    ctx.reject(path, 0,
               src.code() == errc::not_found           ? reject_reason::not_found
               : src.code() == errc::permission_denied ? reject_reason::outside_roots
                                                       : reject_reason::io_error,
               src.err().message);
    return;
  }
  detail::read_named(ctx, path, **src, 0);
}

void read_directory(detail::read_context& ctx, const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (ctx.opt.skip_hidden && !n.empty() && n[0] == '.') continue;
    entries.push_back(it->path());
  }
  if (ec) {
    ctx.reject(dir.string(), 0, reject_reason::io_error, "list " + dir.string() + ": " + ec.message());
    return;
  }
  if (entries.empty()) {
    ctx.reject(dir.string(), 0, reject_reason::empty_directory, "directory has nothing to read");
    return;
  }
  // Byte order of the names: the same on every machine and locale.
  std::sort(entries.begin(), entries.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
  for (const auto& e : entries) {
    if (ctx.stopped) return;
    if (ctx.opt.claimed && ctx.opt.claimed(e.string())) continue;
    read_entry(ctx, e);
  }
}

void read_entry(detail::read_context& ctx, const fs::path& path) {
  std::error_code ec;
  auto st = fs::symlink_status(path, ec);
  if (ec) {
    ctx.reject(path.string(), 0, ec == std::errc::no_such_file_or_directory ? reject_reason::not_found : reject_reason::io_error,
               "stat " + path.string() + ": " + ec.message());
    return;
  }
  if (!inside_roots(ctx, path.string())) return;
  if (fs::is_symlink(st)) {
    auto target = fs::status(path, ec);
    if (ec || !fs::exists(target)) {
      ctx.reject(path.string(), 0, reject_reason::unsupported_file_type, "broken symbolic link");
      return;
    }
    if (fs::is_directory(target)) {
      // Not followed: links can make cycles, and the walk must end.
      ctx.reject(path.string(), 0, reject_reason::unsupported_file_type, "symbolic link to a directory, not followed");
      return;
    }
    st = target;
  }
  if (fs::is_directory(st)) read_directory(ctx, path);
  else if (fs::is_regular_file(st)) read_file(ctx, path.string());
  else ctx.reject(path.string(), 0, reject_reason::unsupported_file_type, "not a regular file or directory");
}

reader_options sane(reader_options o) {
  // Bounds that keep the builders' arithmetic meaningful.
  o.max_line_bytes = std::max<std::size_t>(o.max_line_bytes, 64);
  o.max_document_bytes = std::max<std::size_t>(o.max_document_bytes, 64);
  o.sniff_bytes = std::max<std::size_t>(o.sniff_bytes, 1);
  return o;
}

}  // namespace

read_stats read_path(const std::string& path, const reader_options& opt, const read_callbacks& cb) {
  const reader_options o = sane(opt);
  detail::read_context ctx{o, cb, {}};
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) {
    ctx.reject(path, 0, reject_reason::not_found, "no such file or directory: " + path);
    return ctx.stats;
  }
  if (!inside_roots(ctx, path)) return ctx.stats;
  // The path the caller named is followed even when it is a symbolic link.
  if (fs::is_directory(fs::status(path, ec))) read_directory(ctx, fs::path(path));
  else read_entry(ctx, fs::path(path));
  return ctx.stats;
}

read_stats read_stream(const std::string& name, byte_source& src, const reader_options& opt,
                       const read_callbacks& cb) {
  const reader_options o = sane(opt);
  detail::read_context ctx{o, cb, {}};
  detail::read_named(ctx, name, src, 0);
  return ctx.stats;
}

}  // namespace loom::ingest
