// Training a byte-level BPE (libs/tokenizer/train) on a fixed corpus, and the
// tokenizer.json it is written to: determinism, round trips, compression, the
// streaming piece counter, and the loaded encoder against a naive reference of
// Hugging Face's merge loop (rank order, leftmost first) on 10,000 random
// strings and real text. In-process; no node, no service.
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/pretokenize.hpp"
#include "libs/tokenizer/train/bpe_train.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "libs/tokenizer/train/piece_counts.hpp"
#include "tests/tokenizer_train/common.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <random>
#include <string>
#include <vector>

using namespace loom;
using namespace loom::tokenizer;
using namespace loom::test::tok_train;
using ids = std::vector<std::uint32_t>;

namespace {

const trained_bpe& trained(std::size_t vocab) {
  static const trained_bpe t1000 = train_licenses(1000);
  static const trained_bpe t4000 = train_licenses(4000);
  REQUIRE((vocab == 1000 || vocab == 4000));
  return vocab == 1000 ? t1000 : t4000;
}

// The encoder as a user gets it: written to tokenizer.json text and read back.
const bpe& loaded(std::size_t vocab) {
  static std::map<std::size_t, bpe> cache;
  if (auto it = cache.find(vocab); it != cache.end()) return it->second;
  auto spec = parse_hf_json(to_hf_json(spec_of(trained(vocab))), "trained.json");
  REQUIRE_MESSAGE(spec.ok(), spec.err().to_string());
  auto b = encoder_of(*spec, "trained.json");
  REQUIRE_MESSAGE(b.ok(), b.err().to_string());
  return cache.emplace(vocab, std::move(b).value()).first->second;
}

// Hugging Face's BPE model, naively: within each piece, merge the adjacent pair
// of lowest merge rank (leftmost on ties) until no listed pair is adjacent.
class reference_bpe {
 public:
  explicit reference_bpe(const bpe_spec& s) {
    for (std::uint32_t id = 0; id < s.tokens.size(); ++id) id_[s.tokens[id]] = id;
    for (std::size_t r = 0; r < s.merges.size(); ++r)
      rank_[{s.tokens[s.merges[r].left], s.tokens[s.merges[r].right]}] = r;
  }
  ids encode(std::string_view text) const {
    ids out;
    for (std::string_view piece : split_pieces(text)) {
      std::vector<std::string> parts;
      for (char c : piece) parts.emplace_back(1, c);
      for (;;) {
        std::size_t best = parts.size(), best_rank = SIZE_MAX;
        for (std::size_t i = 0; i + 1 < parts.size(); ++i)
          if (auto it = rank_.find({parts[i], parts[i + 1]}); it != rank_.end() && it->second < best_rank) {
            best_rank = it->second;
            best = i;
          }
        if (best == parts.size()) break;
        parts[best] += parts[best + 1];
        parts.erase(parts.begin() + static_cast<long>(best) + 1);
      }
      for (const auto& p : parts) out.push_back(id_.at(p));
    }
    return out;
  }

 private:
  std::map<std::string, std::uint32_t> id_;
  std::map<std::pair<std::string, std::string>, std::size_t> rank_;
};

std::string random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace

TEST_CASE("training the license corpus to 1,000 and 4,000 tokens is deterministic, byte for byte") {
  for (std::size_t vocab : {1000u, 4000u}) {
    CAPTURE(vocab);
    const trained_bpe& a = trained(vocab);
    const trained_bpe b = train_licenses(vocab);
    CHECK(a.vocab_size() == vocab);
    CHECK_FALSE(a.stopped_early);
    CHECK(a.merges.size() == vocab - 257);
    CHECK(a.special == "<|endoftext|>");
    CHECK(to_hf_json(spec_of(a)) == to_hf_json(spec_of(b)));
    CHECK(loaded(vocab).vocab_size() == vocab);
    CHECK(loaded(vocab).special_id("<|endoftext|>") == vocab - 1);
  }
  // The first merges of English legal text: a space and a letter, "th", "the".
  const trained_bpe& t = trained(1000);
  CHECK(t.tokens[256] == " t");
  CHECK(t.last_merge_count >= 2);
}

TEST_CASE("every id of a trained tokenizer decodes, and a token's own bytes encode to it") {
  for (std::size_t vocab : {1000u, 4000u}) {
    CAPTURE(vocab);
    const bpe& b = loaded(vocab);
    const trained_bpe& t = trained(vocab);
    for (std::uint32_t id = 0; id + 1 < vocab; ++id) {
      CAPTURE(id);
      REQUIRE(b.token_bytes(id) == t.tokens[id]);
      REQUIRE(b.decode(ids{id}) == t.tokens[id]);
      if (id >= 256) {
        const auto& m = t.merges[id - 256];
        REQUIRE(t.tokens[id] == t.tokens[m.left] + t.tokens[m.right]);
        REQUIRE(m.left < id);
        REQUIRE(m.right < id);
      }
      REQUIRE(b.encode(t.tokens[id]) == ids{id});
    }
    CHECK(b.decode(ids{static_cast<std::uint32_t>(vocab - 1)}) == "<|endoftext|>");
  }
}

TEST_CASE("a trained tokenizer round-trips arbitrary UTF-8 and random bytes") {
  std::mt19937_64 rng(0x70C);
  for (std::size_t vocab : {1000u, 4000u}) {
    const bpe& b = loaded(vocab);
    for (int i = 0; i < 2000; ++i) {
      const std::string s = i % 2 ? random_text(rng, 300) : random_bytes(rng, rng() % 300);
      const ids e = b.encode(s);
      for (auto id : e) REQUIRE(id < vocab - 1);  // never the special token
      REQUIRE(b.decode(e) == s);
    }
    for (const auto& text : license_texts()) CHECK(b.decode(b.encode(text)) == text);
  }
}

TEST_CASE("a trained tokenizer compresses its training text better than bytes, and more with more tokens") {
  const auto& texts = license_texts();
  std::size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();
  double ratio[2] = {};
  int k = 0;
  for (std::size_t vocab : {1000u, 4000u}) {
    const bpe& b = loaded(vocab);
    std::size_t tokens = 0;
    for (const auto& t : texts) tokens += b.encode(t).size();
    // Counting the distinct pieces once each gives the same number (what the CLI reports).
    std::uint64_t by_pieces = 0;
    const piece_counts& c = license_counts();
    for (std::size_t i = 0; i < c.distinct(); ++i) by_pieces += b.encode(c.piece(i)).size() * c.count(i);
    CHECK(by_pieces == tokens);
    ratio[k++] = static_cast<double>(bytes) / static_cast<double>(tokens);
    MESSAGE("vocab " << vocab << ": " << bytes << " bytes -> " << tokens << " tokens, "
                     << static_cast<double>(bytes) / static_cast<double>(tokens) << " bytes/token");
  }
  CHECK(ratio[0] > 2.5);  // bytes would be 1.0
  CHECK(ratio[1] > ratio[0] + 0.5);
}

TEST_CASE("counting pieces in chunks of any size gives the counts of whole documents") {
  std::mt19937_64 rng(0xC0C);
  std::vector<std::string> docs = license_texts();
  for (int i = 0; i < 300; ++i) docs.push_back(random_text(rng, 2000));
  for (int i = 0; i < 100; ++i) docs.push_back(random_bytes(rng, rng() % 500));
  docs.push_back(std::string(5000, ' ') + "x" + std::string(3000, '\n'));  // runs across many chunks
  docs.push_back("a\xE3\x80\x80\xE3\x80\x80" "b'll c\xF0\x9F\x98\x80 ");
  piece_counts whole;
  for (const auto& d : docs) whole.add_document(d);
  for (std::size_t max_chunk : {1u, 2u, 3u, 7u, 64u, 4096u}) {
    CAPTURE(max_chunk);
    piece_counts chunked;
    for (const auto& d : docs) {
      for (std::size_t at = 0; at < d.size();) {
        const std::size_t n = std::min(d.size() - at, 1 + rng() % max_chunk);
        chunked.feed(std::string_view(d).substr(at, n));
        at += n;
      }
      chunked.end_document();
    }
    REQUIRE(chunked.distinct() == whole.distinct());
    CHECK(chunked.total_pieces() == whole.total_pieces());
    CHECK(chunked.total_bytes() == whole.total_bytes());
    std::map<std::string_view, std::uint64_t> a, b;
    for (std::size_t i = 0; i < whole.distinct(); ++i) a[whole.piece(i)] = whole.count(i);
    for (std::size_t i = 0; i < chunked.distinct(); ++i) b[chunked.piece(i)] = chunked.count(i);
    CHECK(a == b);
  }
}

TEST_CASE("the loaded tokenizer.json encodes like a naive reference merge loop on 10,000 random strings and real text") {
  std::mt19937_64 rng(0x5EF);
  for (std::size_t vocab : {1000u, 4000u}) {
    CAPTURE(vocab);
    const reference_bpe ref(spec_of(trained(vocab)));
    const bpe& b = loaded(vocab);
    std::size_t checked = 0;
    for (int i = 0; i < 10000; ++i) {
      const std::string s = i % 5 == 4 ? random_bytes(rng, rng() % 200) : random_text(rng, 200);
      CAPTURE(s);
      REQUIRE(b.encode(s) == ref.encode(s));
      ++checked;
    }
    for (const auto& t : license_texts()) CHECK(b.encode(t) == ref.encode(t));
    CHECK(checked == 10000);
  }
}

TEST_CASE("ties go to the lexicographically smaller pair, and a piece's pairs are counted by its frequency") {
  piece_counts c;
  for (int i = 0; i < 3; ++i) c.add_document("cd ab");  // pieces "cd", " ab": (c,d) ties ( ,a) and (a,b)
  c.add_document(" zz zz");                            // " zz" twice: ( ,z) 2, (z,z) 2
  train_options o;
  o.vocab_size = 262;
  o.min_frequency = 1;
  auto t = train_bpe(c, o);
  REQUIRE(t.ok());
  REQUIRE(t->tokens.size() == 261);
  CHECK(t->tokens[256] == " a");  // count 3, and " " < "a" < "c"
  CHECK(t->tokens[257] == " ab"); // (" a", "b") now has 3, and " a" < "c"
  CHECK(t->tokens[258] == "cd");
  CHECK(t->tokens[259] == " z");  // count 2, " " < "z"
  CHECK(t->tokens[260] == " zz");
  CHECK(t->last_merge_count == 2);
}

TEST_CASE("train_bpe refuses vocabulary sizes outside [257, 2^20], learns no merge at 257 and stops early at min_frequency") {
  const piece_counts& c = license_counts();
  train_options o;
  for (std::size_t bad : {0u, 256u, (1u << 20) + 1}) {
    o.vocab_size = bad;
    auto t = train_bpe(c, o);
    REQUIRE_FALSE(t.ok());
    CHECK(t.code() == errc::invalid_argument);
    CHECK(t.err().message.find("[257, 1048576]") != std::string::npos);
  }
  o.vocab_size = 257;
  auto t = train_bpe(c, o);
  REQUIRE(t.ok());
  CHECK(t->merges.empty());
  CHECK(t->vocab_size() == 257);
  o.vocab_size = 1 << 20;
  o.min_frequency = 50;
  t = train_bpe(c, o);
  REQUIRE(t.ok());
  CHECK(t->stopped_early);
  CHECK(t->vocab_size() < 3000);
  CHECK(t->last_merge_count >= 50);
  piece_counts empty;
  o.vocab_size = 1000;
  t = train_bpe(empty, o);
  REQUIRE(t.ok());
  CHECK(t->vocab_size() == 257);
  CHECK(t->stopped_early);
}

TEST_CASE("the written tokenizer.json has Hugging Face's layout: BPE model, ByteLevel parts, merges as \"a b\"") {
  const std::string text = to_hf_json(spec_of(trained(1000)));
  const auto j = nlohmann::json::parse(text);
  CHECK(j["version"] == "1.0");
  CHECK(j["normalizer"].is_null());
  CHECK(j["post_processor"].is_null());
  CHECK(j["pre_tokenizer"] == nlohmann::json::parse(
                                  R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true})"));
  CHECK(j["decoder"]["type"] == "ByteLevel");
  CHECK(j["added_tokens"].size() == 1);
  CHECK(j["added_tokens"][0]["id"] == 999);
  CHECK(j["added_tokens"][0]["content"] == "<|endoftext|>");
  CHECK(j["added_tokens"][0]["special"] == true);
  const auto& m = j["model"];
  CHECK(m["type"] == "BPE");
  CHECK(m["vocab"].size() == 1000);
  CHECK(m["vocab"]["<|endoftext|>"] == 999);
  CHECK(m["vocab"]["Ġ"] == 32);  // the space byte's character
  CHECK(m["vocab"]["!"] == 33);
  CHECK(m["vocab"]["Ā"] == 0);
  CHECK(m["vocab"]["Ġt"] == 256);
  REQUIRE(m["merges"].size() == 743);
  CHECK(m["merges"][0] == "Ġ t");
  for (const auto& merge : m["merges"]) {
    const std::string s = merge.get<std::string>();
    REQUIRE(std::count(s.begin(), s.end(), ' ') == 1);
  }
  CHECK(to_byte_level(" \n\xff") == "ĠĊÿ");
  CHECK(from_byte_level("ĠĊÿ") == std::optional<std::string>(" \n\xff"));
  CHECK_FALSE(from_byte_level("é\u0144").has_value());  // U+0144: past the 324 characters of the alphabet
  CHECK_FALSE(from_byte_level("\xff").has_value());    // not UTF-8
}
