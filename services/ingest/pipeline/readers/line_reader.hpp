// Splits a byte_source into lines with a hard size limit. A line longer than the
// limit is reported as too_long and skipped while streaming: memory stays at
// most limit + one read buffer, however long the line (a 64 MiB line under a
// 16 MiB limit never exists in memory whole). Single-threaded; borrows `src`.
#pragma once

#include "services/ingest/pipeline/readers/byte_source.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::ingest {

class line_reader {
 public:
  enum class kind : std::uint8_t { line, too_long, end, error };
  struct item {
    kind k = kind::end;
    std::string_view text;    // kind::line: the line without '\n' (and without a final '\r');
                              // valid until the next call to next()
    std::uint64_t number = 0; // 1-based line number
    std::uint64_t length = 0; // bytes of the line (kind::too_long: all of it, though skipped)
  };

  line_reader(byte_source& src, std::size_t max_line_bytes);

  // The next line, a skipped over-long line, the end, or a read error (then
  // error() holds it and src.failure_reason() says which rejection it is).
  item next();
  const error& last_error() const { return error_; }
  // Most bytes held at once for one line (for tests of the memory bound).
  std::size_t peak_line_bytes() const { return peak_; }

 private:
  bool fill();  // false at end of stream or error

  byte_source& src_;
  std::size_t max_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  bool eof_ = false, failed_ = false;
  error error_;
  std::string spill_;
  std::uint64_t number_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace loom::ingest
