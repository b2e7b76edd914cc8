#include "services/ingest/pipeline/readers/line_reader.hpp"

#include <cstring>

namespace loom::ingest {

// Read size per call: big enough to amortise the source's per-call cost.
constexpr std::size_t read_buffer_bytes = 256 * 1024;

line_reader::line_reader(byte_source& src, std::size_t max_line_bytes)
    : src_(src), max_(max_line_bytes), buf_(read_buffer_bytes) {}

bool line_reader::fill() {
  if (eof_ || failed_) return false;
  auto r = src_.read(buf_.data(), buf_.size());
  if (!r.ok()) {
    failed_ = true;
    error_ = r.err();
    return false;
  }
  pos_ = 0;
  end_ = *r;
  if (end_ == 0) eof_ = true;
  return end_ > 0;
}

line_reader::item line_reader::next() {
  if (failed_) return {kind::error, {}, number_, 0};
  spill_.clear();
  bool started = false, overflow = false;
  std::uint64_t len = 0;
  const std::uint64_t number = number_ + 1;
  auto finish = [&](std::string_view text) -> item {
    number_ = number;
    if (overflow) return {kind::too_long, {}, number, len};
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    return {kind::line, text, number, len};
  };
  for (;;) {
    if (pos_ == end_ && !fill()) {
      if (failed_) return {kind::error, {}, number, len};
      if (!started) return {kind::end, {}, number_, 0};
      return finish(spill_);  // last line without '\n'
    }
    started = true;
    const char* base = buf_.data() + pos_;
    std::size_t avail = end_ - pos_;
    const char* nl = static_cast<const char*>(std::memchr(base, '\n', avail));
    std::size_t piece = nl ? static_cast<std::size_t>(nl - base) : avail;
    len += piece;
    pos_ += piece + (nl ? 1 : 0);
    if (!overflow && len > max_) {
      overflow = true;
      std::string().swap(spill_);  // give the memory back now, not at the next line
    } else if (!overflow) {
      if (nl && spill_.empty()) {
        peak_ = std::max<std::size_t>(peak_, piece);
        return finish(std::string_view(base, piece));
      }
      spill_.append(base, piece);
      peak_ = std::max(peak_, spill_.size());
    }
    if (nl) return finish(spill_);
  }
}

}  // namespace loom::ingest
