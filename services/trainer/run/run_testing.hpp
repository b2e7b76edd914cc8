// Test helpers of the training-run tests: a small learnable shard set and a
// small model config over it. Header-only; tests only.
#pragma once

#include "libs/shards/writer.hpp"
#include "libs/runspec/run_config.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

namespace loom::trainer::testing {

// Appends `docs` documents of 50 ids, a noisy counting pattern over 64 ids
// (learnable), the same for the same count (seed 11).
inline void append_counting_docs(shards::shard_writer& w, int docs) {
  std::mt19937 rng(11);
  for (int d = 0; d < docs; ++d) {
    std::vector<std::uint32_t> doc(50);
    std::uint32_t x = rng() % 64;
    for (auto& id : doc) {
      id = x;
      x = (x + 1 + (rng() % 8 == 0 ? rng() % 3 : 0)) % 64;
    }
    REQUIRE(w.append(doc).ok());
  }
}

// A dataset of 40 documents of the counting pattern.
inline std::string make_shards(const std::string& dir) {
  shards::writer_options opt;
  opt.dir = dir;
  auto w = shards::shard_writer::create(opt);
  REQUIRE(w.ok());
  append_counting_docs(*w, 40);
  REQUIRE(w->finish().ok());
  return dir;
}

inline runspec::run_config small_config(const std::string& shards, const std::string& out, int steps = 12,
                        std::vector<std::string> extra = {}) {
  std::string toml = "[model]\nlayers = 2\nheads = 2\nchannels = 32\nmax_seq_len = 16\nvocab = 64\n"
                     "[data]\nshards = \"" + shards + "\"\n"
                     "[train]\nbatch = 2\nseq_len = 8\ngrad_accum = 2\nseed = 5\nthreads = 2\n"
                     "[optim]\nlr = 0.01\nmin_lr = 0.001\nwarmup_steps = 2\n"
                     "[checkpoint]\nevery_steps = 4\nkeep = 10\n"
                     "[output]\ndir = \"" + out + "\"\n";
  extra.push_back("train.steps=" + std::to_string(steps));
  auto c = runspec::parse_run_config(toml, "/test/run.toml", extra);
  REQUIRE(c.ok());
  return *c;
}

}  // namespace loom::trainer::testing
