// messages: the aggregator protocol's headers as plain structs (no protobuf):
// what a site's delta and a published global update say about the raw payload
// frame that follows them. wire.hpp maps them to and from loom.v1 messages;
// rounds.hpp consumes delta_header::meta. Value types.
#pragma once

#include "services/aggregator/rounds.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::aggregator {

inline constexpr std::size_t sha256_bytes = 32;

// Header of a site's delta: [DeltaHeader][payload].
struct delta_header {
  std::string job;
  delta_meta meta;  // site, round, fragment, base version, element count, tokens
  std::string codec;
  std::uint64_t payload_bytes = 0;
  std::string payload_sha256;  // 32 raw bytes
};

enum class update_kind { params, outer_update };

// Header of a fragment's new global version: [GlobalUpdateHeader][payload].
struct global_update_header {
  std::string job;
  std::uint32_t fragment = 0;
  std::uint64_t version = 0;
  std::uint64_t base_version = 0;  // outer_update: version - 1; params: 0
  update_kind kind = update_kind::params;
  std::string codec;
  std::uint64_t elements = 0;
  std::uint64_t payload_bytes = 0;
  std::string payload_sha256;
  std::uint64_t round = 0;
  std::uint32_t contributors = 0;
};

}  // namespace loom::aggregator
