#include "libs/shards/loader.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace loom::shards {
namespace {

std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Keyed bijection on [0, n): a balanced Feistel network on the smallest even bit width
// that covers n, with cycle-walking back into range. O(1) memory and random access, so
// an epoch's order never has to be materialised or stored in a checkpoint.
std::uint64_t permute(std::uint64_t i, std::uint64_t n, std::uint64_t key) {
  // Six rounds: four already make a keyed Feistel a good pseudorandom permutation;
  // two more cost nothing next to copying T tokens.
  constexpr int rounds = 6;
  unsigned half = 1;
  while (half < 32 && (std::uint64_t{1} << (2 * half)) < n) ++half;
  const std::uint64_t mask = (std::uint64_t{1} << half) - 1;
  std::uint64_t x = i;
  do {  // at most a few walks: the domain is < 4n
    std::uint64_t l = x >> half, r = x & mask;
    for (int k = 0; k < rounds; ++k) {
      const std::uint64_t f = mix64(r ^ mix64(key + static_cast<std::uint64_t>(k))) & mask;
      const std::uint64_t nl = r;
      r = l ^ f;
      l = nl;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}

}  // namespace

std::string to_json(const cursor& c) {
  return nlohmann::json{{"epoch", c.epoch}, {"position", c.position}}.dump();
}

result<cursor> cursor_from_json(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("epoch") || !j.contains("position") ||
      !j["epoch"].is_number_unsigned() || !j["position"].is_number_unsigned())
    return make_error(errc::invalid_argument,
                      "cursor: expected {\"epoch\":N,\"position\":N}, got " + std::string(text));
  return cursor{j["epoch"].get<std::uint64_t>(), j["position"].get<std::uint64_t>()};
}

result<loader> loader::create(dataset& data, loader_options opt, cursor start) {
  if (opt.batch == 0 || opt.seq_len == 0)
    return make_error(errc::invalid_argument, "loader: batch and seq_len must be positive");
  if (data.token_count() < opt.seq_len + 1)
    return make_error(errc::invalid_argument,
                      "loader: dataset has " + std::to_string(data.token_count()) +
                          " tokens, a window of seq_len " + std::to_string(opt.seq_len) +
                          " needs " + std::to_string(opt.seq_len + 1));
  loader l(data, opt);
  l.windows_ = (data.token_count() - 1) / opt.seq_len;
  if (start.position >= l.windows_)
    return make_error(errc::invalid_argument,
                      "loader: cursor position " + std::to_string(start.position) +
                          " past the " + std::to_string(l.windows_) + " windows of an epoch");
  l.at_ = start;
  l.row_.resize(opt.seq_len + 1);
  return l;
}

std::uint64_t loader::window_at(std::uint64_t epoch, std::uint64_t position) const {
  if (!opt_.shuffle) return position;
  return permute(position, windows_, mix64(opt_.seed) ^ mix64(~epoch));
}

cursor loader::advanced(cursor c) const {
  if (++c.position == windows_) {
    c.position = 0;
    ++c.epoch;
  }
  return c;
}

status loader::next(std::span<std::uint32_t> out) {
  const std::size_t row = opt_.seq_len + 1;
  if (out.size() != opt_.batch * row)
    return make_error(errc::invalid_argument, "loader: batch buffer of " +
                                                  std::to_string(out.size()) + ", need B*(T+1) = " +
                                                  std::to_string(opt_.batch * row));
  cursor c = at_;
  for (std::size_t b = 0; b < opt_.batch; ++b) {
    const std::uint64_t w = window_at(c.epoch, c.position);
    if (auto s = data_->read(w * opt_.seq_len, out.subspan(b * row, row)); !s) return s;
    c = advanced(c);
  }
  at_ = c;
  return ok_status();
}

status loader::next(std::span<std::uint32_t> inputs, std::span<std::uint32_t> targets) {
  const std::size_t t = opt_.seq_len;
  if (inputs.size() != opt_.batch * t || targets.size() != opt_.batch * t)
    return make_error(errc::invalid_argument, "loader: inputs and targets must be B*T = " +
                                                  std::to_string(opt_.batch * t));
  cursor c = at_;
  for (std::size_t b = 0; b < opt_.batch; ++b) {
    const std::uint64_t w = window_at(c.epoch, c.position);
    if (auto s = data_->read(w * t, row_); !s) return s;
    std::copy(row_.begin(), row_.end() - 1, inputs.begin() + static_cast<std::ptrdiff_t>(b * t));
    std::copy(row_.begin() + 1, row_.end(), targets.begin() + static_cast<std::ptrdiff_t>(b * t));
    c = advanced(c);
  }
  at_ = c;
  return ok_status();
}

}  // namespace loom::shards
