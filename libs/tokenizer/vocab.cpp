#include "libs/tokenizer/vocab.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <set>

namespace loom::tokenizer::detail {
namespace {

constexpr std::array<std::int8_t, 256> b64_values = [] {
  std::array<std::int8_t, 256> t{};
  t.fill(-1);
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<std::int8_t>(i);
  return t;
}();

error bad(const std::string& source, const std::string& what) {
  return make_error(errc::corruption, source + ": not a tiktoken encoder file: " + what);
}

}  // namespace

bool base64_decode(std::string_view in, std::string& out) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    const int v = b64_values[c];
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return bits < 6;  // a lone trailing character cannot carry a byte
}

result<vocab_file> parse_vocab(std::string_view json, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    return bad(source, e.what());
  }
  if (!j.is_object() || !j.contains("bpe_ranks") || !j["bpe_ranks"].is_string())
    return bad(source, "no string field \"bpe_ranks\"");
  vocab_file v;
  if (j.contains("pat_str")) {
    if (!j["pat_str"].is_string()) return bad(source, "\"pat_str\" is not a string");
    v.pattern = j["pat_str"].get<std::string>();
  }

  // rank -> bytes; every rank once, every byte string once.
  std::vector<std::string> by_rank;
  std::vector<bool> seen;
  const std::string& ranks = j["bpe_ranks"].get_ref<const std::string&>();
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos < ranks.size();) {
    std::size_t eol = ranks.find('\n', pos);
    if (eol == std::string::npos) eol = ranks.size();
    std::string_view line(ranks.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line.empty()) continue;
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    std::uint32_t rank = 0;
    const char* first = line.data() + sp1 + 1;
    const char* last = line.data() + (sp2 == std::string_view::npos ? line.size() : sp2);
    if (sp1 == std::string_view::npos || std::from_chars(first, last, rank).ptr != last)
      return bad(source, "bpe_ranks line " + std::to_string(line_no) + " has no first rank");
    for (std::size_t t = sp2; t != std::string_view::npos && t < line.size(); ++rank) {
      const std::size_t e = std::min(line.find(' ', t + 1), line.size());
      std::string bytes;
      if (!base64_decode(line.substr(t + 1, e - t - 1), bytes) || bytes.empty())
        return bad(source, "bad base64 for rank " + std::to_string(rank));
      if (rank >= by_rank.size()) {
        by_rank.resize(rank + 1);
        seen.resize(rank + 1);
      }
      if (seen[rank]) return bad(source, "rank " + std::to_string(rank) + " appears twice");
      seen[rank] = true;
      by_rank[rank] = std::move(bytes);
      t = e;
    }
  }
  if (by_rank.empty()) return bad(source, "no tokens");
  if (auto it = std::find(seen.begin(), seen.end(), false); it != seen.end())
    return bad(source, "rank " + std::to_string(it - seen.begin()) + " is missing (ranks must be 0..N-1)");
  std::set<std::string_view> distinct(by_rank.begin(), by_rank.end());
  if (distinct.size() != by_rank.size()) return bad(source, "two ranks have the same bytes");
  for (int b = 0; b < 256; ++b)
    if (const char c = static_cast<char>(b); !distinct.count(std::string_view(&c, 1)))
      return bad(source, "byte " + std::to_string(b) + " is not a token (not byte-level)");

  v.offsets.reserve(by_rank.size() + 1);
  v.offsets.push_back(0);
  for (const auto& t : by_rank) {
    v.arena += t;
    v.offsets.push_back(static_cast<std::uint32_t>(v.arena.size()));
  }

  // Special tokens must take the ids right after the ordinary ones.
  std::map<std::uint64_t, std::string> specials;
  if (j.contains("special_tokens")) {
    if (!j["special_tokens"].is_object()) return bad(source, "\"special_tokens\" is not an object");
    for (const auto& [text, id] : j["special_tokens"].items()) {
      if (!id.is_number_unsigned()) return bad(source, "special token " + text + " has no id");
      specials[id.get<std::uint64_t>()] = text;
    }
  }
  std::uint64_t next = by_rank.size();
  for (auto& [id, text] : specials) {
    if (id != next++) return bad(source, "special token " + text + " does not follow the ordinary ranks");
    v.specials.push_back(std::move(text));
  }
  if (j.contains("explicit_n_vocab")) {
    if (!j["explicit_n_vocab"].is_number_unsigned() || j["explicit_n_vocab"].get<std::uint64_t>() != next)
      return bad(source, "explicit_n_vocab is not " + std::to_string(next));
  }
  return v;
}

}  // namespace loom::tokenizer::detail
