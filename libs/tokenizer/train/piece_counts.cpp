#include "libs/tokenizer/train/piece_counts.hpp"

#include "libs/tokenizer/pretokenize.hpp"
#include "libs/tokenizer/tables.hpp"

namespace loom::tokenizer {
namespace {

// piece_end decides where a piece ends by looking at most at the character
// after it, or (for `\s+(?!\S)`) at one whitespace character and the one after
// that: 3 + 4 bytes of UTF-8 past the end. A piece that ends this close to the
// end of the bytes seen so far may change when more bytes come.
constexpr std::size_t lookahead = 16;

}  // namespace

void piece_counts::feed(std::string_view chunk) {
  bytes_ += chunk.size();
  pending_.append(chunk);
  const std::string_view text(pending_);
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = piece_end(text, pos);
    if (end + lookahead > text.size()) break;
    add(text.substr(pos, end - pos), 1);
    pos = end;
  }
  pending_.erase(0, pos);
}

void piece_counts::end_document() {
  const std::string_view text(pending_);
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = piece_end(text, pos);
    add(text.substr(pos, end - pos), 1);
    pos = end;
  }
  pending_.clear();
  ++documents_;
}

void piece_counts::add_all(const piece_counts& other) {
  for (std::size_t i = 0; i < other.distinct(); ++i) add(other.piece(i), other.count(i));
  bytes_ += other.bytes_;  // (add() counted other's pieces)
  documents_ += other.documents_;
}

void piece_counts::add(std::string_view piece, std::uint64_t times) {
  pieces_ += times;
  if (entries_.size() * 2 >= slots_.size()) grow();
  const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
  const std::uint64_t h = detail::hash_bytes(p, piece.size());
  const auto tag = static_cast<std::uint32_t>(h >> 32);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    slot& s = slots_[i];
    if (s.index == 0) {
      entries_.push_back(entry{arena_.size(), static_cast<std::uint32_t>(piece.size()), times});
      arena_.append(piece);
      s = slot{tag, static_cast<std::uint32_t>(entries_.size())};
      return;
    }
    if (s.tag != tag) continue;
    entry& e = entries_[s.index - 1];
    if (e.len == piece.size() && detail::same_bytes(arena_.data() + e.off, p, piece.size())) {
      e.count += times;
      return;
    }
  }
}

void piece_counts::grow() {
  slots_.assign(slots_.empty() ? 1024 : slots_.size() * 2, slot{});
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t k = 0; k < entries_.size(); ++k) {
    const auto* p = reinterpret_cast<const unsigned char*>(arena_.data() + entries_[k].off);
    const std::uint64_t h = detail::hash_bytes(p, entries_[k].len);
    std::size_t i = h & mask;
    while (slots_[i].index != 0) i = (i + 1) & mask;
    slots_[i] = slot{static_cast<std::uint32_t>(h >> 32), static_cast<std::uint32_t>(k + 1)};
  }
}

}  // namespace loom::tokenizer
