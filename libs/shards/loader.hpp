// loader: (B, T+1) windows of consecutive tokens from a dataset's token stream for the
// trainer. Window w covers stream tokens [w*T, w*T + T + 1): inputs are its first T,
// targets the same shifted by one. Each epoch visits every window once, in an order
// permuted from (seed, epoch) by a keyed bijection, so a saved cursor resumes exactly
// without storing the order. A batch may straddle two epochs. Owned by one thread; the
// dataset must outlive the loader.
#pragma once

#include "libs/shards/dataset.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::shards {

// Where the loader is: `position` windows of `epoch` already yielded.
struct cursor {
  std::uint64_t epoch = 0;
  std::uint64_t position = 0;
  bool operator==(const cursor&) const = default;
};
std::string to_json(const cursor& c);  // {"epoch":E,"position":P}
result<cursor> cursor_from_json(std::string_view json);  // invalid_argument when malformed

struct loader_options {
  std::size_t batch = 0;    // B
  std::size_t seq_len = 0;  // T
  std::uint64_t seed = 0;
  bool shuffle = true;  // false: windows in stream order every epoch
};

class loader {
 public:
  // invalid_argument when B or T is 0, the dataset holds fewer than T+1 tokens, or `start`
  // lies past the end of an epoch.
  static result<loader> create(dataset& data, loader_options opt, cursor start = {});

  std::uint64_t windows_per_epoch() const { return windows_; }
  cursor position() const { return at_; }

  // Fills `out`, shape (B, T+1) row-major, with the next B windows and advances the cursor.
  // invalid_argument when out.size() != B*(T+1); a shard error leaves the cursor unmoved.
  status next(std::span<std::uint32_t> out);
  // Same windows split into inputs (B, T) and targets (B, T), targets[b][t] = window[b][t+1].
  status next(std::span<std::uint32_t> inputs, std::span<std::uint32_t> targets);

  // Stream index of the window yielded at `position` of `epoch`; a permutation of
  // [0, windows_per_epoch()) for each epoch.
  std::uint64_t window_at(std::uint64_t epoch, std::uint64_t position) const;

 private:
  loader(dataset& d, loader_options o) : data_(&d), opt_(o) {}
  cursor advanced(cursor c) const;

  dataset* data_;
  loader_options opt_;
  std::uint64_t windows_ = 0;
  cursor at_;
  std::vector<std::uint32_t> row_;  // one window, T+1 tokens, for the split next()
};

}  // namespace loom::shards
