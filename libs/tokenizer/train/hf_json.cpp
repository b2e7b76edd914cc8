#include "libs/tokenizer/train/hf_json.hpp"

#include "libs/files/files.hpp"
#include "libs/tokenizer/unicode_class.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

namespace loom::tokenizer {
namespace {

using json = nlohmann::json;

struct byte_map {
  std::array<char32_t, 256> to_char{};
  std::array<std::int16_t, 324> to_byte{};  // U+0000..U+0143; -1 = not in the alphabet
};

const byte_map& bytes_to_unicode() {
  static const byte_map m = [] {
    byte_map t;
    t.to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t.to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      t.to_byte[t.to_char[b]] = static_cast<std::int16_t>(b);
    }
    return t;
  }();
  return m;
}

void append_utf8(std::string& out, char32_t cp) {  // cp < 0x800: all the alphabet needs
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string json_string(const std::string& s) { return json(s).dump(); }

error unsupported(const std::string& source, const std::string& what) {
  return make_error(errc::unimplemented,
                    source + ": " + what + " (only byte-level BPE with GPT-2's pre-tokenizer is implemented)");
}
error corrupt(const std::string& source, const std::string& what) {
  return make_error(errc::corruption, source + ": " + what);
}

bool null_or_absent(const json& j, const char* key) { return !j.contains(key) || j[key].is_null(); }

std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// A ByteLevel pre-tokenizer that splits by GPT-2's pattern and adds no space.
std::optional<error> check_pre_tokenizer(const json& j, const std::string& source) {
  if (!j.contains("pre_tokenizer") || !j["pre_tokenizer"].is_object() ||
      j["pre_tokenizer"].value("type", "") != "ByteLevel")
    return unsupported(source, "pre_tokenizer is " + (j.contains("pre_tokenizer") ? shown(j["pre_tokenizer"]) : "absent") +
                                   ", not ByteLevel");
  const json& p = j["pre_tokenizer"];
  // HF's defaults when absent: add_prefix_space true, use_regex true.
  if (!p.contains("add_prefix_space") || p["add_prefix_space"] != false)
    return unsupported(source, "pre_tokenizer.add_prefix_space is not false");
  if (p.contains("use_regex") && p["use_regex"] != true)
    return unsupported(source, "pre_tokenizer.use_regex is not true");
  return std::nullopt;
}

std::optional<error> check_pipeline(const json& j, const std::string& source) {
  for (const char* key : {"normalizer", "truncation", "padding"})
    if (!null_or_absent(j, key)) return unsupported(source, std::string(key) + " is " + shown(j[key]) + ", not null");
  if (auto e = check_pre_tokenizer(j, source)) return e;
  if (!null_or_absent(j, "post_processor") &&
      (!j["post_processor"].is_object() || j["post_processor"].value("type", "") != "ByteLevel"))
    return unsupported(source, "post_processor is " + shown(j["post_processor"]) + ", not null or ByteLevel");
  if (!j.contains("decoder") || !j["decoder"].is_object() || j["decoder"].value("type", "") != "ByteLevel")
    return unsupported(source, "decoder is " + (j.contains("decoder") ? shown(j["decoder"]) : "absent") +
                                   ", not ByteLevel");
  const json& m = j["model"];
  if (m.contains("type") && m["type"] != "BPE")
    return unsupported(source, "model.type is " + shown(m["type"]) + ", not \"BPE\"");
  if (!null_or_absent(m, "dropout")) return unsupported(source, "model.dropout is " + shown(m["dropout"]) + ", not null");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!null_or_absent(m, key) && m[key] != "")
      return unsupported(source, std::string("model.") + key + " is " + shown(m[key]));
  if (m.contains("byte_fallback") && m["byte_fallback"] != false)
    return unsupported(source, "model.byte_fallback is " + shown(m["byte_fallback"]));
  if (m.contains("ignore_merges") && !m["ignore_merges"].is_boolean())
    return corrupt(source, "model.ignore_merges is not true or false");
  return std::nullopt;
}

}  // namespace

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, bytes_to_unicode().to_char[b]);
  return out;
}

std::optional<std::string> from_byte_level(std::string_view text) {
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    char32_t cp = 0;
    const std::size_t len = decode_utf8(p, end, cp);
    if (len == 0 || cp >= bytes_to_unicode().to_byte.size() || bytes_to_unicode().to_byte[cp] < 0) return std::nullopt;
    out += static_cast<char>(bytes_to_unicode().to_byte[cp]);
    p += len;
  }
  return out;
}

bpe_spec spec_of(const trained_bpe& t) {
  bpe_spec s;
  s.tokens = t.tokens;
  s.merges = t.merges;
  s.specials = {t.special};
  return s;
}

result<bpe_spec> spec_from_ranks(const bpe& b) {
  bpe_spec s;
  const auto n = static_cast<std::uint32_t>(b.ordinary_size());
  std::unordered_map<std::string_view, std::uint32_t> rank;
  rank.reserve(n * 2);
  for (std::uint32_t r = 0; r < n; ++r) {
    s.tokens.emplace_back(b.token_bytes(r));
    rank.emplace(b.token_bytes(r), r);
  }
  for (std::uint32_t r = n; r < b.vocab_size(); ++r) s.specials.emplace_back(b.token_bytes(r));
  std::vector<std::string> parts;
  for (std::uint32_t r = 0; r < n; ++r) {
    const std::string& t = s.tokens[r];
    if (t.size() < 2) continue;
    parts.clear();
    for (char c : t) parts.emplace_back(1, c);
    for (;;) {  // tiktoken's merge with ranks below r: lowest rank, leftmost on ties
      std::size_t best = parts.size();
      std::uint32_t best_rank = r;
      for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = rank.find(parts[i] + parts[i + 1]);
        if (it != rank.end() && it->second < best_rank) {
          best_rank = it->second;
          best = i;
        }
      }
      if (best == parts.size()) break;
      parts[best] += parts[best + 1];
      parts.erase(parts.begin() + static_cast<long>(best) + 1);
    }
    if (parts.size() != 2)
      return make_error(errc::unimplemented, "token " + std::to_string(r) + " is not one merge of lower-ranked tokens");
    s.merges.push_back({rank.at(parts[0]), rank.at(parts[1])});
  }
  return s;
}

result<bpe> encoder_of(const bpe_spec& s, const std::string& source) {
  return bpe::from_merges(s.tokens, s.merges, s.specials, s.ignore_merges, source);
}

std::string to_hf_json(const bpe_spec& s) {
  const std::size_t n = s.tokens.size();
  std::string out;
  out.reserve(n * 40 + 4096);
  out += "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [";
  for (std::size_t i = 0; i < s.specials.size(); ++i) {
    out += i ? ",\n" : "\n";
    out += "    {\n      \"id\": " + std::to_string(n + i) + ",\n      \"content\": " + json_string(s.specials[i]) +
           ",\n      \"single_word\": false,\n      \"lstrip\": false,\n      \"rstrip\": false,\n"
           "      \"normalized\": false,\n      \"special\": true\n    }";
  }
  out += s.specials.empty() ? "],\n" : "\n  ],\n";
  out +=
      "  \"normalizer\": null,\n"
      "  \"pre_tokenizer\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n"
      "    \"trim_offsets\": true,\n    \"use_regex\": true\n  },\n"
      "  \"post_processor\": null,\n"
      "  \"decoder\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n"
      "    \"trim_offsets\": true,\n    \"use_regex\": true\n  },\n"
      "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
      "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \"fuse_unk\": false,\n"
      "    \"byte_fallback\": false,\n    \"ignore_merges\": ";
  out += s.ignore_merges ? "true" : "false";
  out += ",\n    \"vocab\": {";
  // Special tokens sit in the vocabulary too (as GPT-2's file has them), so
  // every reader gives them the same id.
  for (std::size_t id = 0; id < n + s.specials.size(); ++id) {
    out += id ? ",\n      " : "\n      ";
    out += json_string(id < n ? to_byte_level(s.tokens[id]) : s.specials[id - n]) + ": " + std::to_string(id);
  }
  out += "\n    },\n    \"merges\": [";
  for (std::size_t i = 0; i < s.merges.size(); ++i) {
    out += i ? ",\n      " : "\n      ";
    out += json_string(to_byte_level(s.tokens[s.merges[i].left]) + " " + to_byte_level(s.tokens[s.merges[i].right]));
  }
  out += s.merges.empty() ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n";
  return out;
}

status write_hf_json(const std::string& path, const bpe_spec& s) { return files::write_atomic(path, to_hf_json(s)); }

namespace {

result<bpe_spec> parse_spec(const json& j, const std::string& source) {
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    return corrupt(source, "no \"model\" object (not a tokenizer.json)");
  if (auto e = check_pipeline(j, source)) return *e;
  const json& m = j["model"];
  if (!m.contains("vocab") || !m["vocab"].is_object()) return corrupt(source, "model.vocab is not an object");
  if (!m.contains("merges") || !m["merges"].is_array()) return corrupt(source, "model.merges is not an array");

  // Special tokens: every added token, special, numbered after the vocabulary.
  std::map<std::uint64_t, std::string> specials;
  std::map<std::string, std::uint64_t, std::less<>> special_ids;
  if (!null_or_absent(j, "added_tokens")) {
    if (!j["added_tokens"].is_array()) return corrupt(source, "added_tokens is not an array");
    std::size_t i = 0;
    for (const json& a : j["added_tokens"]) {
      const std::string where = "added_tokens[" + std::to_string(i++) + "]";
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") ||
          !a["content"].is_string())
        return corrupt(source, where + " has no id and content");
      if (a.value("special", false) != true)
        return unsupported(source, where + " " + shown(a["content"]) + " is not special");
      const auto id = a["id"].get<std::uint64_t>();
      const auto content = a["content"].get<std::string>();
      if (!specials.emplace(id, content).second || !special_ids.emplace(content, id).second)
        return corrupt(source, where + " repeats an id or a content");
    }
  }

  bpe_spec s;
  s.ignore_merges = m.value("ignore_merges", false);
  std::vector<std::string> by_id;  // byte-level strings of the ordinary tokens
  std::vector<bool> seen;
  for (const auto& [name, id] : m["vocab"].items()) {
    if (!id.is_number_unsigned()) return corrupt(source, "model.vocab " + json_string(name) + " has no id");
    const auto v = id.get<std::uint64_t>();
    if (auto it = special_ids.find(name); it != special_ids.end()) {
      if (it->second != v) return corrupt(source, "special token " + json_string(name) + " has two ids");
      continue;
    }
    if (v >= max_trained_vocab * 16) return corrupt(source, "model.vocab " + json_string(name) + " has id " + std::to_string(v));
    if (v >= by_id.size()) {
      by_id.resize(v + 1);
      seen.resize(v + 1);
    }
    if (seen[v]) return corrupt(source, "model.vocab id " + std::to_string(v) + " appears twice");
    seen[v] = true;
    by_id[v] = name;
  }
  if (by_id.empty()) return corrupt(source, "model.vocab is empty");
  if (auto it = std::find(seen.begin(), seen.end(), false); it != seen.end())
    return unsupported(source, "model.vocab has no id " + std::to_string(it - seen.begin()) +
                                   " (ordinary ids must be 0..N-1, special tokens after them)");
  std::uint64_t next = by_id.size();
  for (auto& [id, content] : specials) {
    if (id != next++)
      return unsupported(source, "special token " + json_string(content) + " has id " + std::to_string(id) + ", not " +
                                     std::to_string(next - 1) + " (special tokens must follow the vocabulary)");
    s.specials.push_back(content);
  }
  std::unordered_map<std::string_view, std::uint32_t> id_of;
  id_of.reserve(by_id.size() * 2);
  for (std::uint32_t id = 0; id < by_id.size(); ++id) {
    auto bytes = from_byte_level(by_id[id]);
    if (!bytes || bytes->empty())
      return unsupported(source, "model.vocab " + json_string(by_id[id]) + " (id " + std::to_string(id) +
                                     ") is not a byte-level token");
    s.tokens.push_back(std::move(*bytes));
    id_of.emplace(by_id[id], id);
  }

  std::size_t i = 0;
  for (const json& e : m["merges"]) {
    const std::string where = "model.merges[" + std::to_string(i++) + "]";
    std::string left, right;
    if (e.is_string()) {
      const std::string& t = e.get_ref<const std::string&>();
      const std::size_t sp = t.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == t.size() || t.find(' ', sp + 1) != std::string::npos)
        return corrupt(source, where + " " + shown(e) + " is not \"LEFT RIGHT\"");
      left = t.substr(0, sp);
      right = t.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      left = e[0].get<std::string>();
      right = e[1].get<std::string>();
    } else {
      return corrupt(source, where + " " + shown(e) + " is neither \"LEFT RIGHT\" nor [LEFT, RIGHT]");
    }
    const auto l = id_of.find(left), r = id_of.find(right), lr = id_of.find(left + right);
    if (l == id_of.end() || r == id_of.end() || lr == id_of.end())
      return corrupt(source, where + " " + shown(e) + " names a token that is not in model.vocab");
    s.merges.push_back({l->second, r->second});
  }
  return s;
}

}  // namespace

result<bpe_spec> parse_hf_json(std::string_view text, const std::string& source) {
  try {
    return parse_spec(json::parse(text), source);
  } catch (const json::exception& e) {  // malformed JSON, or a field of the wrong type
    return corrupt(source, std::string("not a valid tokenizer.json: ") + e.what());
  }
}

result<bpe> load_hf_json(const std::string& path) {
  auto text = files::read_file(path);
  if (!text) return make_error(text.code(), "cannot read tokenizer " + path + ": " + text.err().message);
  auto s = parse_hf_json(*text, path);
  if (!s) return s.err();
  return encoder_of(*s, path);
}

}  // namespace loom::tokenizer
