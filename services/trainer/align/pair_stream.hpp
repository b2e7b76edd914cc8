// pair_stream: the order in which a stage sees its preference pairs — seeded,
// shuffled per epoch, resumable from a two-number cursor a checkpoint keeps,
// so a resumed RM or DPO stage sees exactly the batches an uninterrupted one
// would. Also the held-out split of a real preference file: by a hash of the
// prompt, so one prompt's pairs never straddle train and held-out.
// Owned by the one thread that trains.
#pragma once

#include "libs/status/status.hpp"
#include "services/trainer/align/preference_data.hpp"

#include <cstdint>
#include <vector>

namespace loom::align {

struct pair_cursor {
  std::uint64_t epoch = 0;
  std::uint64_t next = 0;  // index into the epoch's permutation
};

class pair_stream {
 public:
  // invalid_argument when there are fewer pairs than one batch, or pairs < 1.
  static result<pair_stream> create(std::vector<pair_tokens> pairs, int pairs_per_batch, int seq_len,
                                    std::uint64_t seed);
  // The next batch of pairs_per_batch pairs; an epoch's tail short of a batch
  // is skipped (the next epoch reshuffles everything).
  result<pair_batch> next();
  pair_cursor position() const { return cur_; }
  // invalid_argument when the cursor is past an epoch's end.
  status seek(pair_cursor c);

 private:
  pair_stream() = default;
  void shuffle();
  std::vector<pair_tokens> pairs_;
  std::vector<std::uint32_t> order_;
  int P_ = 0, T_ = 0;
  std::uint64_t seed_ = 0;
  pair_cursor cur_;
};

// Splits records into (train, held-out): a record is held out when a 64-bit
// FNV-1a hash of (seed, prompt) falls in the first `fraction` of the range.
// Deterministic; the same prompt always lands on the same side.
std::pair<std::vector<preference_record>, std::vector<preference_record>> split_held_out(
    const std::vector<preference_record>& records, double fraction, std::uint64_t seed);

}  // namespace loom::align
