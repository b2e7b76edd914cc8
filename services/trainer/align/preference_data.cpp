#include "services/trainer/align/preference_data.hpp"

#include "libs/atrest/object.hpp"
#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace loom::align {

result<std::vector<preference_record>> preferences_from_jsonl(std::string_view jsonl, const std::string& origin) {
  std::vector<preference_record> out;
  std::size_t pos = 0, line = 0;
  while (pos < jsonl.size()) {
    std::size_t end = jsonl.find('\n', pos);
    if (end == std::string_view::npos) end = jsonl.size();
    ++line;
    const std::string_view l = jsonl.substr(pos, end - pos);
    pos = end + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto bad = [&](const std::string& why) {
      return make_error(errc::invalid_argument, origin + ":" + std::to_string(line) + ": " + why);
    };
    const auto j = nlohmann::json::parse(l, nullptr, false);
    if (!j.is_object()) return bad("expected a JSON object {\"prompt\",\"chosen\",\"rejected\"}");
    preference_record r;
    for (auto [field, into] : {std::pair{"prompt", &r.prompt}, {"chosen", &r.chosen}, {"rejected", &r.rejected}}) {
      if (!j.contains(field)) return bad(std::string("a preference record needs the field \"") + field + "\"");
      if (!j[field].is_string()) return bad(std::string("the field \"") + field + "\" must be a string");
      *into = j[field].get<std::string>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

result<std::vector<preference_record>> read_preferences(const std::string& path) {
  auto text = atrest::read_object(path);  // plain, or sealed at rest
  if (!text) return text.err();
  return preferences_from_jsonl(*text, path);
}

std::string preferences_to_jsonl(std::span<const preference_record> records) {
  std::string out;
  for (const auto& r : records)
    out += nlohmann::json{{"prompt", r.prompt}, {"chosen", r.chosen}, {"rejected", r.rejected}}.dump() + "\n";
  return out;
}

pair_tokens render_pair(const preference_record& r, const encode_fn& encode, const render_options& o) {
  pair_tokens t;
  t.prompt = encode(o.prompt_prefix + r.prompt + o.response_prefix);
  t.chosen = encode(r.chosen);
  t.rejected = encode(r.rejected);
  if (o.end_token >= 0) {
    t.chosen.push_back(o.end_token);
    t.rejected.push_back(o.end_token);
  }
  return t;
}

result<pair_batch> make_pair_batch(std::span<const pair_tokens> pairs, int seq_len) {
  auto bad = [](const std::string& m) { return make_error(errc::invalid_argument, "make_pair_batch: " + m); };
  if (pairs.empty()) return bad("no pairs");
  if (seq_len < 3) return bad("seq_len must be >= 3");
  const std::size_t P = pairs.size(), T = std::size_t(seq_len);
  pair_batch b;
  b.pairs = int(P);
  b.seq_len = seq_len;
  b.inputs.assign(2 * P * T, 0);
  b.targets.assign(2 * P * T, 0);
  b.mask.assign(2 * P * T, 0.0f);
  b.last.assign(2 * P, 0);
  for (std::size_t row = 0; row < 2 * P; ++row) {
    const pair_tokens& pt = pairs[row % P];
    const auto& resp = row < P ? pt.chosen : pt.rejected;
    if (pt.prompt.empty() || resp.empty())
      return bad("pair " + std::to_string(row % P) + " has an empty prompt or response");
    // Keep the response (up to T − 1 tokens) and as much of the prompt's end as fits.
    const std::size_t rn = std::min(resp.size(), T - 1);
    const std::size_t pn = std::min(pt.prompt.size(), T - rn);
    std::int32_t* in = b.inputs.data() + row * T;
    std::size_t n = 0;
    for (std::size_t i = pt.prompt.size() - pn; i < pt.prompt.size(); ++i) in[n++] = pt.prompt[i];
    for (std::size_t i = 0; i < rn; ++i) in[n++] = resp[i];
    for (std::size_t t = 0; t + 1 < n; ++t) {
      b.targets[row * T + t] = in[t + 1];
      b.mask[row * T + t] = t + 1 >= pn ? 1.0f : 0.0f;  // the target is a response token
    }
    b.last[row] = int(n - 1);
  }
  return b;
}

std::vector<std::int32_t> encode_bytes(std::string_view s) {
  std::vector<std::int32_t> out(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) out[i] = static_cast<unsigned char>(s[i]);
  return out;
}

}  // namespace loom::align
