// Internal to the readers: runs every line of a stream through a callback,
// turning over-long lines and read errors into rejections. Single-threaded.
#pragma once

#include "services/ingest/pipeline/readers/line_reader.hpp"
#include "services/ingest/pipeline/readers/read_context.hpp"

#include <string>

namespace loom::ingest::detail {

inline std::string too_long_message(std::uint64_t len, std::size_t limit) {
  return "line of " + std::to_string(len) + " bytes is over the limit of " + std::to_string(limit) +
         " (skipped without loading it)";
}

// on_line(std::string_view text, std::uint64_t line_no) -> bool (false: stop).
// Returns false when the source failed (rejection made) or a callback stopped.
template <class OnLine>
bool for_each_line(read_context& ctx, const std::string& name, byte_source& src, OnLine&& on_line) {
  line_reader lr(src, ctx.opt.max_line_bytes);
  for (;;) {
    auto it = lr.next();
    switch (it.k) {
      case line_reader::kind::end: return true;
      case line_reader::kind::error:
        reject_stream_error(ctx, name, it.number, src, lr.last_error());
        return false;
      case line_reader::kind::too_long:
        ctx.reject(name, it.number, reject_reason::line_too_long, too_long_message(it.length, ctx.opt.max_line_bytes));
        break;
      case line_reader::kind::line:
        if (!on_line(it.text, it.number)) return false;
        break;
    }
  }
}

}  // namespace loom::ingest::detail
