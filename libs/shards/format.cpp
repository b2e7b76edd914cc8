#include "libs/shards/format.hpp"

#include <cstdio>

namespace loom::shards {

std::string_view to_string(dtype t) {
  switch (t) {
    case dtype::uint16: return "uint16";
    case dtype::uint32: return "uint32";
  }
  return "unknown";
}

std::optional<dtype> dtype_from_string(std::string_view name) {
  if (name == "uint16") return dtype::uint16;
  if (name == "uint32") return dtype::uint32;
  return std::nullopt;
}

std::string shard_file_name(std::uint64_t index) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "shard-%06llu.bin", static_cast<unsigned long long>(index));
  return buf;
}

}  // namespace loom::shards
