// The ring schedule of one all_reduce_sum: which chunk a member sends and
// receives at each step, and how chunks split into frames. Pure arithmetic on
// (size, world, rank); a value type, no state beyond its inputs.
//
// The buffer of `size` floats splits into `world` chunks as evenly as
// possible (the first size % world chunks hold one float more). Steps run
// 0 .. 2(world-1)-1 over both phases: steps 0 .. world-2 are reduce-scatter,
// the rest all-gather. At step t, rank r sends chunk (r - t) mod W to rank
// r+1 and receives chunk (r - t - 1) mod W from rank r-1: added in during
// reduce-scatter, copied during all-gather. So chunk c is summed as
// ((x_c + x_{c+1}) + x_{c+2}) + ... + x_{c-1} (ranks mod W), finished at rank
// c-1 and then passed round unchanged: one fixed order per chunk, the same
// bits on every member and in every rerun.
//
// Each chunk travels in segments of at most `segment_floats` (always at least
// one segment, possibly empty, so every step exchanges a frame and even a
// 0-float call checks that the members agree).
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::collective {

struct float_range {
  std::size_t offset = 0;
  std::size_t count = 0;
};

class ring_schedule {
 public:
  // REQUIRES: world >= 1, rank < world, segment_floats >= 1.
  ring_schedule(std::size_t size, std::uint32_t world, std::uint32_t rank, std::size_t segment_floats)
      : size_(size), world_(world), rank_(rank), segment_(segment_floats) {}

  std::uint32_t steps() const { return 2 * (world_ - 1); }
  bool reduces(std::uint32_t step) const { return step + 1 < world_; }  // reduce-scatter step
  std::uint32_t step_in_phase(std::uint32_t step) const { return reduces(step) ? step : step - (world_ - 1); }
  std::uint32_t send_chunk(std::uint32_t step) const { return mod(rank_, step); }
  std::uint32_t recv_chunk(std::uint32_t step) const { return mod(rank_, step + 1); }

  float_range chunk(std::uint32_t c) const {
    const std::size_t base = size_ / world_, extra = size_ % world_;
    return {c * base + (c < extra ? c : extra), base + (c < extra ? 1 : 0)};
  }
  std::uint32_t segments(std::uint32_t c) const {
    const std::size_t n = chunk(c).count;
    return n == 0 ? 1 : static_cast<std::uint32_t>((n + segment_ - 1) / segment_);
  }
  float_range segment(std::uint32_t c, std::uint32_t k) const {
    const float_range ch = chunk(c);
    const std::size_t begin = std::size_t{k} * segment_;
    if (begin >= ch.count) return {ch.offset + ch.count, 0};
    const std::size_t n = ch.count - begin < segment_ ? ch.count - begin : segment_;
    return {ch.offset + begin, n};
  }

 private:
  // (r - d) mod W for d <= 2W.
  std::uint32_t mod(std::uint32_t r, std::uint32_t d) const { return (r + 2 * world_ - d) % world_; }

  std::size_t size_;
  std::uint32_t world_;
  std::uint32_t rank_;
  std::size_t segment_;
};

}  // namespace loom::collective
