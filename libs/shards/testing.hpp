// Test helpers for libs/shards: a temporary directory under /tmp removed on scope exit,
// and deterministic documents. Tests only.
#pragma once

#include "libs/files/temp_dir.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace loom::shards::testing {

class temp_dir : public files::temp_dir {
 public:
  temp_dir() : files::temp_dir("loom-shards") {}
};

// `n` documents of 0..max_len-1 ids below `vocab`, from a fixed seed.
inline std::vector<std::vector<std::uint32_t>> make_docs(std::size_t n, std::size_t max_len,
                                                         std::uint32_t vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<std::uint32_t>> docs(n);
  for (auto& d : docs) {
    d.resize(rng() % max_len);
    for (auto& id : d) id = rng() % vocab;
  }
  return docs;
}

}  // namespace loom::shards::testing
