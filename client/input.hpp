// Bounded reads of the files `loom` itself opens (inputs to tokenize and
// data pii, templates, token files): a file larger than the command can hold,
// or one that never ends (/dev/zero, a pipe), is an error naming the file and
// the limit instead of an out-of-memory abort. Stateless; any thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::cli {

// The whole file when it holds at most `limit` bytes; reads at most limit + 1
// bytes to find out. Errors: files::errno_error's codes for open/read, and
// resource_exhausted "<path> is larger than <limit> (the most <who> reads)"
// (who: e.g. "`loom tokenize`").
result<std::string> read_capped(const std::string& path, std::uint64_t limit, std::string_view who);

// The files a training command reads: PATH itself when it is a regular file,
// or the regular files under a directory (recursively) in path order.
// not_found when it is missing; invalid_argument for a device or a pipe (it
// may never end).
result<std::vector<std::string>> input_files(const std::string& path);

// "256 MiB", "64 KiB", "1000 bytes": a limit as people read it.
std::string size_text(std::uint64_t bytes);

}  // namespace loom::cli
