#include "libs/tokenizer/train/bpe_train.hpp"

#include <algorithm>
#include <unordered_set>

namespace loom::tokenizer {
namespace {

constexpr std::uint32_t none = 0xFFFFFFFFu;

std::uint64_t pair_key(std::uint32_t a, std::uint32_t b) { return (std::uint64_t{a} << 32) | b; }

// (left, right) -> pair index; open addressing, load <= 1/2.
class pair_index {
 public:
  // The index of `key`, or `fresh` after storing key -> fresh.
  std::uint32_t find_or_add(std::uint64_t key, std::uint32_t fresh) {
    if (count_ * 2 >= slots_.size()) grow();
    for (std::size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      slot& s = slots_[i];
      if (s.index == none) {
        s = slot{key, fresh};
        ++count_;
        return fresh;
      }
      if (s.key == key) return s.index;
    }
  }

 private:
  struct slot {
    std::uint64_t key = 0;
    std::uint32_t index = none;
  };
  static std::uint64_t hash(std::uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 29);
  }
  void grow() {
    std::vector<slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 4096 : old.size() * 2, slot{});
    mask_ = slots_.size() - 1;
    for (const slot& s : old) {
      if (s.index == none) continue;
      std::size_t i = hash(s.key) & mask_;
      while (slots_[i].index != none) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }
  std::vector<slot> slots_;
  std::size_t mask_ = 0, count_ = 0;
};

class trainer {
 public:
  explicit trainer(const train_options& o) : o_(o) {
    for (int b = 0; b < 256; ++b) {
      tokens_.emplace_back(1, static_cast<char>(b));
      token_set_.insert(tokens_.back());
    }
  }

  void load_words(const piece_counts& counts) {
    for (std::size_t i = 0; i < counts.distinct(); ++i) {
      const std::string_view p = counts.piece(i);
      for (std::size_t at = 0; at < p.size(); at += o_.max_word) {
        const std::size_t n = std::min(o_.max_word, p.size() - at);
        if (n < 2) continue;  // no pair to learn from
        word_off_.push_back(symbols_.size());
        word_len_.push_back(static_cast<std::uint32_t>(n));
        word_count_.push_back(counts.count(i));
        for (std::size_t k = 0; k < n; ++k) symbols_.push_back(static_cast<unsigned char>(p[at + k]));
      }
    }
    word_stamp_.assign(word_len_.size(), 0);
    for (std::uint32_t w = 0; w < word_len_.size(); ++w) {
      const std::uint32_t* x = symbols_.data() + word_off_[w];
      for (std::uint32_t k = 0; k + 1 < word_len_[w]; ++k) {
        const std::uint32_t t = pair_of(x[k], x[k + 1]);
        count_[t] += static_cast<std::int64_t>(word_count_[w]);
        note_word(t, w);
      }
    }
    for (std::uint32_t t = 0; t < count_.size(); ++t)
      if (count_[t] > 0) heap_.push_back(entry{count_[t], t});
    std::make_heap(heap_.begin(), heap_.end(), order());
  }

  trained_bpe run() {
    trained_bpe out;
    const std::size_t want = o_.vocab_size - 1;  // ordinary tokens; <|endoftext|> is the last id
    while (tokens_.size() < want) {
      if (heap_.empty()) break;
      std::pop_heap(heap_.begin(), heap_.end(), order());
      const entry top = heap_.back();
      heap_.pop_back();
      const std::uint32_t t = top.pair;
      if (blocked_[t]) continue;
      if (top.count != count_[t]) {  // stale: the count fell since (a rise pushed its own entry)
        if (count_[t] > 0 && count_[t] < top.count) push(t);
        continue;
      }
      if (static_cast<std::uint64_t>(top.count) < std::max<std::uint64_t>(o_.min_frequency, 1)) break;
      std::string merged = tokens_[left_[t]] + tokens_[right_[t]];
      if (token_set_.count(merged)) {  // made by an earlier merge of another split: never a second way
        blocked_[t] = 1;
        continue;
      }
      const auto c = static_cast<std::uint32_t>(tokens_.size());
      token_set_.insert(merged);
      tokens_.push_back(std::move(merged));
      out.merges.push_back({left_[t], right_[t]});
      out.last_merge_count = static_cast<std::uint64_t>(top.count);
      apply(t, c);
    }
    out.stopped_early = tokens_.size() < want;
    out.tokens = std::move(tokens_);
    return out;
  }

 private:
  struct entry {
    std::int64_t count;
    std::uint32_t pair;
  };
  // Heap order: more occurrences first, then the smaller (left bytes, right bytes).
  struct worse {
    const trainer* self = nullptr;
    bool operator()(const entry& x, const entry& y) const {
      if (x.count != y.count) return x.count < y.count;
      const auto& tk = self->tokens_;
      const int l = tk[self->left_[x.pair]].compare(tk[self->left_[y.pair]]);
      if (l != 0) return l > 0;
      return tk[self->right_[x.pair]].compare(tk[self->right_[y.pair]]) > 0;
    }
  };
  worse order() const { return {this}; }

  std::uint32_t pair_of(std::uint32_t a, std::uint32_t b) {
    const auto fresh = static_cast<std::uint32_t>(count_.size());
    const std::uint32_t t = index_.find_or_add(pair_key(a, b), fresh);
    if (t == fresh) {
      count_.push_back(0);
      left_.push_back(a);
      right_.push_back(b);
      where_.emplace_back();
      stamp_.push_back(0);
      before_.push_back(0);
      blocked_.push_back(0);
    }
    return t;
  }
  void note_word(std::uint32_t t, std::uint32_t w) {
    auto& v = where_[t];
    if (v.empty() || v.back() != w) v.push_back(w);
  }
  void push(std::uint32_t t) {
    heap_.push_back(entry{count_[t], t});
    std::push_heap(heap_.begin(), heap_.end(), order());
  }

  // Pair (a, b) of word w changes by delta occurrences (times the word's count).
  void change(std::uint32_t a, std::uint32_t b, std::int64_t delta, std::uint32_t w, std::uint32_t merging) {
    const std::uint32_t t = pair_of(a, b);
    if (t == merging) return;  // set to 0 once the merge is done
    if (stamp_[t] != merge_no_) {
      stamp_[t] = merge_no_;
      before_[t] = count_[t];
      touched_.push_back(t);
    }
    count_[t] += delta;
    if (delta > 0) note_word(t, w);
  }

  // Replaces every (left, right) of pair t by token c in the words that have it.
  void apply(std::uint32_t t, std::uint32_t c) {
    ++merge_no_;
    touched_.clear();
    const std::uint32_t a = left_[t], b = right_[t];
    const std::vector<std::uint32_t> words = std::move(where_[t]);
    where_[t] = {};
    for (std::uint32_t w : words) {
      if (word_stamp_[w] == merge_no_) continue;  // listed twice
      word_stamp_[w] = merge_no_;
      std::uint32_t* x = symbols_.data() + word_off_[w];
      const std::uint32_t n = word_len_[w];
      const auto cnt = static_cast<std::int64_t>(word_count_[w]);
      // Left to right, non-overlapping (as encoding does); the symbol before an
      // occurrence is the one already written (it may be c), the one after is
      // still the old one.
      std::uint32_t j = 0;
      for (std::uint32_t i = 0; i < n;) {
        if (i + 1 < n && x[i] == a && x[i + 1] == b) {
          if (j > 0) {
            change(x[j - 1], a, -cnt, w, t);
            change(x[j - 1], c, cnt, w, t);
          }
          if (i + 2 < n) {
            change(b, x[i + 2], -cnt, w, t);
            change(c, x[i + 2], cnt, w, t);
          }
          x[j++] = c;
          i += 2;
        } else {
          x[j++] = x[i++];
        }
      }
      word_len_[w] = j;
    }
    count_[t] = 0;
    for (std::uint32_t u : touched_)
      if (count_[u] > before_[u]) push(u);
  }

  train_options o_;
  std::vector<std::string> tokens_;
  std::unordered_set<std::string> token_set_;
  // Words: symbols_[word_off_[w] .. + word_len_[w]), shrinking in place as merges apply.
  std::vector<std::uint32_t> symbols_;
  std::vector<std::uint64_t> word_off_;
  std::vector<std::uint32_t> word_len_;
  std::vector<std::uint64_t> word_count_;
  std::vector<std::uint32_t> word_stamp_;
  // Pairs by index: occurrences, tokens, the words that had them when they
  // rose (a superset: stale entries are skipped), per-merge bookkeeping.
  pair_index index_;
  std::vector<std::int64_t> count_;
  std::vector<std::uint32_t> left_, right_;
  std::vector<std::vector<std::uint32_t>> where_;
  std::vector<std::uint32_t> stamp_;
  std::vector<std::int64_t> before_;
  std::vector<std::uint8_t> blocked_;
  std::vector<std::uint32_t> touched_;
  std::uint32_t merge_no_ = 0;
  // Every pair with occurrences has an entry with at least its count.
  std::vector<entry> heap_;
};

}  // namespace

result<trained_bpe> train_bpe(const piece_counts& counts, const train_options& o) {
  if (o.vocab_size < min_trained_vocab || o.vocab_size > max_trained_vocab)
    return make_error(errc::invalid_argument, "vocabulary size must be in [" + std::to_string(min_trained_vocab) +
                                                  ", " + std::to_string(max_trained_vocab) + "], got " +
                                                  std::to_string(o.vocab_size));
  if (o.max_word < 2) return make_error(errc::invalid_argument, "max_word must be at least 2");
  trainer t(o);
  t.load_words(counts);
  return t.run();
}

}  // namespace loom::tokenizer
