// Internal to libs/atrest: a whole file into a reused buffer.
#pragma once

#include "libs/status/status.hpp"

#include <string>

namespace loom::atrest::detail {

// The file's bytes into `out`, reusing its capacity; errors name the path.
status read_whole(const std::string& path, std::string& out);

}  // namespace loom::atrest::detail
