#include "services/trainer/align/pair_stream.hpp"

#include <numeric>
#include <random>

namespace loom::align {

result<pair_stream> pair_stream::create(std::vector<pair_tokens> pairs, int pairs_per_batch, int seq_len,
                                        std::uint64_t seed) {
  if (pairs_per_batch < 1 || pairs.size() < std::size_t(pairs_per_batch))
    return make_error(errc::invalid_argument, "pair_stream: " + std::to_string(pairs.size()) +
                                                  " pairs cannot fill a batch of " + std::to_string(pairs_per_batch));
  pair_stream s;
  s.pairs_ = std::move(pairs);
  s.P_ = pairs_per_batch;
  s.T_ = seq_len;
  s.seed_ = seed;
  s.shuffle();
  return s;
}

void pair_stream::shuffle() {
  order_.resize(pairs_.size());
  std::iota(order_.begin(), order_.end(), 0u);
  std::mt19937_64 rng(seed_ ^ (0x9E3779B97F4A7C15ull * (cur_.epoch + 1)));
  for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng() % i]);  // Fisher–Yates, our own draws
}

result<pair_batch> pair_stream::next() {
  if (cur_.next + std::uint64_t(P_) > order_.size()) {
    ++cur_.epoch;
    cur_.next = 0;
    shuffle();
  }
  std::vector<pair_tokens> chunk;
  for (int i = 0; i < P_; ++i) chunk.push_back(pairs_[order_[cur_.next + std::uint64_t(i)]]);
  cur_.next += std::uint64_t(P_);
  return make_pair_batch(chunk, T_);
}

status pair_stream::seek(pair_cursor c) {
  if (c.next > order_.size())
    return make_error(errc::invalid_argument, "pair_stream: cursor " + std::to_string(c.next) + " past an epoch of " +
                                                  std::to_string(order_.size()) + " pairs");
  cur_ = c;
  shuffle();
  return ok_status();
}

std::pair<std::vector<preference_record>, std::vector<preference_record>> split_held_out(
    const std::vector<preference_record>& records, double fraction, std::uint64_t seed) {
  std::pair<std::vector<preference_record>, std::vector<preference_record>> out;
  for (const auto& r : records) {
    std::uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (unsigned char c : r.prompt) h = (h ^ c) * 0x100000001b3ull;
    const double u = double(h >> 11) * 0x1.0p-53;
    (u < fraction ? out.second : out.first).push_back(r);
  }
  return out;
}

}  // namespace loom::align
