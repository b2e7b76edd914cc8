#include "libs/tokenizer/bpe.hpp"

#include "libs/files/files.hpp"
#include "libs/tokenizer/merge.hpp"
#include "libs/tokenizer/pretokenize.hpp"
#include "libs/tokenizer/vocab.hpp"

#include <atomic>
#include <cstdlib>
#include <sys/stat.h>
#include <unordered_set>

namespace loom::tokenizer {

struct bpe::impl {
  std::uint64_t serial = 0;  // identifies these tables to the per-thread caches
  detail::token_map tokens;
  detail::merge_tables merge;
  std::vector<std::string> specials;  // id = tokens.size() + index
  // Tokens that a piece equal to their bytes does not become (their bytes merge
  // into other tokens under merges semantics); empty = none.
  std::vector<bool> not_whole;
};

namespace {

using detail::no_rank;

// Per-thread cache of piece -> ids for pieces that are not single tokens.
// Bounded: pieces up to max_key bytes, at most max_entries, then it starts over
// (text's vocabulary is Zipfian: a fresh cache refills with the hot pieces fast).
class piece_cache {
 public:
  static constexpr std::size_t max_key = 64;          // longer pieces rarely repeat
  static constexpr std::size_t max_entries = 1 << 17;  // room for a long tail: 4 MB of slots (+ ~2 MB keys/ids)
  std::uint64_t owner = 0;

  void reset(std::uint64_t new_owner) {
    owner = new_owner;
    slots_.assign(2 * max_entries, slot{});
    keys_.clear();
    ids_.clear();
    count_ = 0;
  }
  // Appends the cached ids of p[0..n) to out; false on a miss.
  bool find(const unsigned char* p, std::size_t n, std::uint64_t h, std::vector<std::uint32_t>& out) const {
    const std::uint32_t tag = static_cast<std::uint32_t>(h >> 32) | 1u;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const slot& s = slots_[i];
      if (s.tag == 0) return false;
      if (s.tag == tag && s.key_len == n && detail::same_bytes(keys_.data() + s.key_off, p, n)) {
        out.insert(out.end(), ids_.data() + s.ids_off, ids_.data() + s.ids_off + s.ids_len);
        return true;
      }
    }
  }
  void insert(const unsigned char* p, std::size_t n, std::uint64_t h, const std::uint32_t* ids, std::size_t count) {
    if (count_ == max_entries) reset(owner);
    const std::uint32_t tag = static_cast<std::uint32_t>(h >> 32) | 1u;
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = h & mask;
    while (slots_[i].tag != 0) i = (i + 1) & mask;
    slots_[i] = slot{tag, static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint32_t>(ids_.size()),
                     static_cast<std::uint16_t>(n), static_cast<std::uint16_t>(count)};
    keys_.append(reinterpret_cast<const char*>(p), n);
    ids_.insert(ids_.end(), ids, ids + count);
    ++count_;
  }

 private:
  struct slot {
    std::uint32_t tag = 0;  // 0 = empty
    std::uint32_t key_off = 0, ids_off = 0;
    std::uint16_t key_len = 0, ids_len = 0;
  };
  std::vector<slot> slots_;
  std::string keys_;
  std::vector<std::uint32_t> ids_;
  std::size_t count_ = 0;
};

struct thread_state {
  piece_cache cache;
  detail::merge_scratch scratch;
};

thread_state& local_state(std::uint64_t owner) {
  thread_local thread_state st;
  if (st.cache.owner != owner) st.cache.reset(owner);
  return st;
}

std::atomic<std::uint64_t> next_serial{1};

}  // namespace

result<bpe> bpe::parse(std::string_view json, const std::string& source) {
  auto v = detail::parse_vocab(json, source);
  if (!v) return v.err();
  if (v->pattern != detail::gpt2_pattern)
    return make_error(errc::unimplemented, source + ": pre-tokenizer pattern is not GPT-2's (only GPT-2's is implemented)");
  auto p = std::make_shared<impl>();
  p->serial = next_serial.fetch_add(1);
  p->tokens.build(std::move(v->arena), std::move(v->offsets));
  for (int b = 0; b < 256; ++b) {
    const auto c = static_cast<unsigned char>(b);
    p->merge.byte_rank[c] = p->tokens.find(&c, 1, detail::hash_bytes(&c, 1));
  }
  p->merge.pairs.build(p->tokens);
  p->specials = std::move(v->specials);
  return bpe(std::move(p));
}

result<bpe> bpe::from_merges(std::vector<std::string> tokens, const std::vector<merge_pair>& merges,
                             std::vector<std::string> specials, bool ignore_merges, const std::string& source) {
  const auto bad = [&](errc code, const std::string& what) { return make_error(code, source + ": " + what); };
  if (tokens.size() >= no_rank) return bad(errc::corruption, "too many tokens");
  auto p = std::make_shared<impl>();
  p->serial = next_serial.fetch_add(1);
  std::string arena;
  std::vector<std::uint32_t> offsets{0};
  for (const auto& t : tokens) {
    if (t.empty()) return bad(errc::corruption, "token " + std::to_string(offsets.size() - 1) + " is empty");
    arena += t;
    if (arena.size() >= no_rank) return bad(errc::corruption, "tokens too long");
    offsets.push_back(static_cast<std::uint32_t>(arena.size()));
  }
  p->tokens.build(std::move(arena), std::move(offsets));
  const auto find = [&](std::string_view b) {
    const auto* q = reinterpret_cast<const unsigned char*>(b.data());
    return p->tokens.find(q, b.size(), detail::hash_bytes(q, b.size()));
  };
  for (std::uint32_t id = 0; id < tokens.size(); ++id)
    if (find(tokens[id]) != id) return bad(errc::corruption, "tokens " + std::to_string(find(tokens[id])) + " and " +
                                                                 std::to_string(id) + " have the same bytes");
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    p->merge.byte_rank[static_cast<unsigned char>(b)] = find(std::string_view(&c, 1));
    if (p->merge.byte_rank[static_cast<unsigned char>(b)] == no_rank)
      return bad(errc::unimplemented, "byte " + std::to_string(b) + " is not a token (not a byte-level BPE)");
  }
  std::vector<detail::pair_map::entry> entries;
  entries.reserve(merges.size());
  std::unordered_set<std::uint64_t> seen;
  std::uint32_t last = 0;
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const auto [l, r] = merges[i];
    const std::string where = "merge " + std::to_string(i);
    if (l >= tokens.size() || r >= tokens.size()) return bad(errc::corruption, where + " names an unknown token id");
    const std::uint32_t m = find(tokens[l] + tokens[r]);
    if (m == no_rank) return bad(errc::corruption, where + "'s result is not a token");
    if (!seen.insert((std::uint64_t{l} << 32) | r).second) return bad(errc::corruption, where + " is listed twice");
    if (i > 0 && m <= last)
      return bad(errc::unimplemented, where + " makes token " + std::to_string(m) + ", not above the previous merge's " +
                                          std::to_string(last) + " (only merges numbered in merge order, each "
                                          "making a token no other merge makes, are implemented)");
    last = m;
    entries.push_back({l, r, m});
  }
  p->merge.pairs.build(entries);
  // A piece that equals a token's bytes becomes that token only if merging
  // would make it (HF merges semantics), unless the file says ignore_merges.
  if (!ignore_merges) {
    std::vector<std::uint32_t> out;
    detail::merge_scratch scratch;
    std::vector<bool> not_whole(tokens.size(), false);
    bool any = false;
    for (std::uint32_t id = 0; id < tokens.size(); ++id) {
      if (tokens[id].size() < 2) continue;
      out.clear();
      detail::merge_piece(p->merge, reinterpret_cast<const unsigned char*>(tokens[id].data()), tokens[id].size(), out,
                          scratch);
      if (out.size() != 1 || out[0] != id) {
        not_whole[id] = true;
        any = true;
      }
    }
    if (any) p->not_whole = std::move(not_whole);
  }
  for (std::size_t i = 0; i < specials.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (specials[i] == specials[j]) return bad(errc::corruption, "special token " + specials[i] + " appears twice");
  p->specials = std::move(specials);
  return bpe(std::move(p));
}

result<bpe> bpe::load(const std::string& path) {
  auto text = files::read_file(path);
  if (!text) return make_error(text.code(), "cannot read vocabulary " + path + ": " + text.err().message);
  return parse(*text, path);
}

result<bpe> bpe::load_gpt2() {
  const char* env = std::getenv(gpt2_vocab_env);
  const std::string path = env && *env ? env : gpt2_vocab_default_path;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    std::string msg = "GPT-2 vocabulary not found: ";
    if (env && *env)
      msg += std::string("$") + gpt2_vocab_env + "=" + path + " does not exist";
    else
      msg += std::string("$") + gpt2_vocab_env + " is unset and " + gpt2_vocab_default_path + " does not exist";
    msg += " (run scripts/install-vocab as root, or set " + std::string(gpt2_vocab_env) +
           " to tiktoken's encoders/gpt2.json; default path " + gpt2_vocab_default_path + ")";
    return make_error(errc::not_found, msg);
  }
  return load(path);
}

std::vector<std::uint32_t> bpe::encode(std::string_view text) const {
  std::vector<std::uint32_t> out;
  out.reserve(text.size() / 3 + 16);  // English averages ~4 bytes per token
  encode_into(text, out);
  return out;
}

void bpe::encode_into(std::string_view text, std::vector<std::uint32_t>& out) const {
  const impl& m = *impl_;
  thread_state& st = local_state(m.serial);
  const auto* base = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t max_token = m.tokens.max_len();
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = piece_end(text, pos);
    const unsigned char* p = base + pos;
    const std::size_t n = end - pos;
    pos = end;
    if (n == 1) {
      out.push_back(m.merge.byte_rank[*p]);
      continue;
    }
    // A piece that is itself a token is that token (tiktoken's rule, checked
    // before merging); then the cache; then the merge.
    const std::uint64_t h = detail::hash_bytes(p, n);
    if (n <= max_token) {
      if (const std::uint32_t r = m.tokens.find(p, n, h); r != no_rank && (m.not_whole.empty() || !m.not_whole[r])) {
        out.push_back(r);
        continue;
      }
    }
    const bool cacheable = n <= piece_cache::max_key;
    if (cacheable && st.cache.find(p, n, h, out)) continue;
    const std::size_t before = out.size();
    detail::merge_piece(m.merge, p, n, out, st.scratch);
    if (cacheable) st.cache.insert(p, n, h, out.data() + before, out.size() - before);
  }
}

std::string bpe::decode(std::span<const std::uint32_t> ids) const {
  std::string out;
  decode_into(ids, out);
  return out;
}

void bpe::decode_into(std::span<const std::uint32_t> ids, std::string& out) const {
  for (std::uint32_t id : ids) out += token_bytes(id);
}

std::size_t bpe::vocab_size() const { return impl_->tokens.size() + impl_->specials.size(); }

std::size_t bpe::ordinary_size() const { return impl_->tokens.size(); }

std::optional<std::uint32_t> bpe::special_id(std::string_view text) const {
  for (std::size_t i = 0; i < impl_->specials.size(); ++i)
    if (impl_->specials[i] == text) return static_cast<std::uint32_t>(impl_->tokens.size() + i);
  return std::nullopt;
}

std::string_view bpe::token_bytes(std::uint32_t id) const {
  const std::size_t n = impl_->tokens.size();
  if (id < n) return impl_->tokens.bytes(id);
  if (id - n < impl_->specials.size()) return impl_->specials[id - n];
  return {};
}

}  // namespace loom::tokenizer
