#include "libs/diloco/fragment_plan.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace loom::diloco {
namespace {

error bad(std::string what) { return make_error(errc::invalid_argument, "fragment_plan: " + what); }

// Appends [offset, offset + count), merged into the previous range when they touch.
void add(std::vector<range>& rs, std::size_t offset, std::size_t count) {
  if (count == 0) return;
  if (!rs.empty() && rs.back().offset + rs.back().count == offset) {
    rs.back().count += count;
    return;
  }
  rs.push_back({offset, count});
}

status check_counts(int fragments, std::uint64_t sync_every) {
  if (fragments < 1) return bad("fragments must be >= 1, got " + std::to_string(fragments));
  if (sync_every < static_cast<std::uint64_t>(fragments))
    return bad("sync_every (H = " + std::to_string(sync_every) + ") must be >= fragments (" +
               std::to_string(fragments) + ") so that no two fragments sync after the same step");
  return ok_status();
}

}  // namespace

result<fragment_plan> fragment_plan::for_gpt2(const model::gpt2_config& cfg, int fragments,
                                              std::uint64_t sync_every) {
  if (auto s = cfg.validate(); !s.ok()) return s.err();
  if (auto s = check_counts(fragments, sync_every); !s.ok()) return s.err();
  if (fragments > cfg.layers)
    return bad("fragments (" + std::to_string(fragments) + ") must be <= layers (" + std::to_string(cfg.layers) +
               "): fragments follow layers");
  using model::tensor_id;
  const auto layout = model::make_param_layout(cfg);
  const std::size_t P = fragments, L = cfg.layers, C = cfg.channels;
  std::vector<fragment> frags(P);
  // Row block p of a (rows, C) table: rows [p*rows/P + min(p, rows%P) ...), as even as can be.
  auto rows_block = [&](tensor_id t, std::size_t rows, std::size_t p) {
    const std::size_t base = rows / P, extra = rows % P;
    const std::size_t first = p * base + std::min(p, extra);
    add(frags[p].ranges, layout.offset(t) + first * C, (base + (p < extra ? 1 : 0)) * C);
  };
  // Ranges are added in buffer order, so each fragment's list is sorted by offset.
  for (std::size_t p = 0; p < P; ++p) rows_block(tensor_id::wte, cfg.padded_vocab, p);
  for (std::size_t p = 0; p < P; ++p) rows_block(tensor_id::wpe, cfg.max_seq_len, p);
  for (int t = static_cast<int>(tensor_id::ln1w); t <= static_cast<int>(tensor_id::fcprojb); ++t) {
    const auto id = static_cast<tensor_id>(t);
    const std::size_t per_layer = layout.size(id) / L;
    for (std::size_t i = 0; i < L; ++i) add(frags[i % P].ranges, layout.offset(id) + i * per_layer, per_layer);
  }
  auto& last = frags[(L - 1) % P].ranges;
  add(last, layout.offset(tensor_id::lnfw), layout.size(tensor_id::lnfw));
  add(last, layout.offset(tensor_id::lnfb), layout.size(tensor_id::lnfb));
  for (auto& f : frags)
    for (const auto& r : f.ranges) f.size += r.count;
  return fragment_plan(std::move(frags), layout.total, sync_every);
}

result<fragment_plan> fragment_plan::flat(std::size_t total, int fragments, std::uint64_t sync_every) {
  if (auto s = check_counts(fragments, sync_every); !s.ok()) return s.err();
  if (static_cast<std::size_t>(fragments) > total)
    return bad("fragments (" + std::to_string(fragments) + ") must be <= the values (" + std::to_string(total) + ")");
  const std::size_t P = fragments, base = total / P, extra = total % P;
  std::vector<fragment> frags(P);
  std::size_t offset = 0;
  for (std::size_t p = 0; p < P; ++p) {
    const std::size_t n = base + (p < extra ? 1 : 0);
    frags[p].ranges.push_back({offset, n});
    frags[p].size = n;
    offset += n;
  }
  return fragment_plan(std::move(frags), total, sync_every);
}

std::size_t fragment_plan::max_size() const {
  std::size_t m = 0;
  for (const auto& f : frags_) m = std::max(m, f.size);
  return m;
}

std::uint64_t fragment_plan::phase(int p) const { return static_cast<std::uint64_t>(p) * h_ / frags_.size(); }

int fragment_plan::due_after(std::uint64_t t) const {
  if (t == 0) return -1;
  const std::uint64_t r = t % h_;
  for (int p = 0; p < fragments(); ++p)
    if (phase(p) == r) return p;
  return -1;
}

std::uint64_t fragment_plan::sync_step(int p, std::uint64_t k) const {
  const std::uint64_t first = phase(p) == 0 ? h_ : phase(p);
  return first + k * h_;
}

void fragment_plan::gather(int p, std::span<const float> full, std::span<float> part) const {
  std::size_t at = 0;
  for (const auto& r : frags_[p].ranges) {
    std::memcpy(part.data() + at, full.data() + r.offset, r.count * sizeof(float));
    at += r.count;
  }
}

void fragment_plan::scatter(int p, std::span<const float> part, std::span<float> full) const {
  std::size_t at = 0;
  for (const auto& r : frags_[p].ranges) {
    std::memcpy(full.data() + r.offset, part.data() + at, r.count * sizeof(float));
    at += r.count;
  }
}

}  // namespace loom::diloco
