// Test and bench helpers for libs/dedup (not part of the library): real prose
// from texts Debian ships on every machine (nothing committed), an independent
// word-5-gram oracle for true Jaccard, and a word-level edit model for planting
// near copies. Deterministic for a given seed and machine. Tests and benches only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace loom::dedup::testing {

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// /usr/share/common-licenses/* then /usr/share/doc/*/copyright, sorted by path,
// each distinct content once.
inline std::vector<std::string> debian_texts() {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses", ec))
    if (e.is_regular_file() && !e.is_symlink()) paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> docs;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/doc", ec)) {
    const auto p = e.path() / "copyright";
    if (std::filesystem::is_regular_file(p, ec)) docs.push_back(p.string());
  }
  std::sort(docs.begin(), docs.end());
  paths.insert(paths.end(), docs.begin(), docs.end());
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const auto& p : paths) {
    auto t = slurp(p);
    if (!t.empty() && seen.insert(t).second) out.push_back(std::move(t));
  }
  return out;
}

// The oracle: words and 5-gram shingles written plainly from the definition in
// fingerprint.hpp (ASCII alnum and bytes >= 0x80 form words, ASCII lowercased).
inline std::vector<std::string> oracle_words(std::string_view text) {
  std::vector<std::string> words;
  std::string w;
  for (unsigned char c : text) {
    const bool in_word = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
    if (in_word) {
      w += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (!w.empty()) {
      words.push_back(w);
      w.clear();
    }
  }
  if (!w.empty()) words.push_back(w);
  return words;
}

inline std::set<std::string> oracle_shingles(std::string_view text) {
  const auto w = oracle_words(text);
  std::set<std::string> s;
  if (w.empty()) return s;
  const std::size_t n = w.size() < 5 ? 1 : w.size() - 4;
  for (std::size_t i = 0; i < n; ++i) {
    std::string g;
    for (std::size_t j = i; j < std::min(i + 5, w.size()); ++j) (g += w[j]) += '\x1f';
    s.insert(std::move(g));
  }
  return s;
}

inline double true_jaccard(const std::set<std::string>& a, const std::set<std::string>& b) {
  if (a.empty() && b.empty()) return 1.0;
  std::size_t common = 0;
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i < *j)
      ++i;
    else if (*j < *i)
      ++j;
    else {
      ++common, ++i, ++j;
    }
  }
  return static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

// Unrelated documents: runs of consecutive lines of the texts, `min_words` to
// `max_words` words, kept only when < 20% of their shingles were seen in an
// earlier document, so any two of them have Jaccard < ~0.2, far from 0.8.
inline std::vector<std::string> unrelated_docs(const std::vector<std::string>& texts, std::size_t count,
                                               std::size_t min_words, std::size_t max_words, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::unordered_set<std::string> seen;
  std::vector<std::string> out;
  std::string doc;  // may run on from one text into the next
  std::size_t words = 0, target = min_words + rng() % (max_words - min_words + 1);
  for (const auto& t : texts) {
    std::istringstream lines(t);
    std::string line;
    while (out.size() < count && std::getline(lines, line)) {
      doc += line;
      doc += '\n';
      words += oracle_words(line).size();
      if (words < target) continue;
      const auto sh = oracle_shingles(doc);
      std::size_t old = 0;
      for (const auto& s : sh) old += seen.count(s);
      if (old * 5 < sh.size()) {
        seen.insert(sh.begin(), sh.end());
        out.push_back(doc);
      }
      doc.clear();
      words = 0;
      target = min_words + rng() % (max_words - min_words + 1);
    }
    if (out.size() >= count) break;
  }
  return out;
}

// Whitespace-separated tokens of `text` (punctuation stays attached).
inline std::vector<std::string> tokens(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  std::string t;
  while (in >> t) out.push_back(t);
  return out;
}

// Each token, with probability `rate`: replaced by a token from `vocab` (1/2),
// deleted (1/4), or followed by an inserted one (1/4); at least one edit, so a
// copy never equals its original. Lines of 12 tokens.
inline std::string edit_words(std::string_view text, double rate, const std::vector<std::string>& vocab,
                              std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::string out;
  std::size_t n = 0;
  auto put = [&](const std::string& t) {
    out += t;
    out += (++n % 12 == 0) ? '\n' : ' ';
  };
  const auto toks = tokens(text);
  const std::size_t forced = toks.empty() ? 0 : rng() % toks.size();  // used when no edit was drawn
  std::vector<bool> edit(toks.size());
  bool any = false;
  for (std::size_t i = 0; i < toks.size(); ++i) any |= (edit[i] = u(rng) < rate);
  if (!any && !toks.empty()) edit[forced] = true;
  for (std::size_t i = 0; i < toks.size(); ++i) {
    const auto& t = toks[i];
    if (!edit[i]) {
      put(t);
      continue;
    }
    const double k = u(rng);
    if (k < 0.5)
      put(vocab[rng() % vocab.size()]);
    else if (k >= 0.75) {
      put(t);
      put(vocab[rng() % vocab.size()]);
    }
  }
  return out;
}

// Same text, whitespace reshuffled (spaces <-> newlines, doubled blanks, a
// trailing newline): equal after normalise_whitespace, different bytes.
inline std::string respace(std::string_view text, std::mt19937_64& rng) {
  std::string out;
  for (const auto& t : tokens(text)) {
    if (!out.empty()) {
      switch (rng() % 4) {
        case 0: out += "  "; break;
        case 1: out += '\n'; break;
        case 2: out += " \t"; break;
        default: out += ' ';
      }
    }
    out += t;
  }
  return out + "\n\n";
}

// A corpus with planted duplicates, labelled by measured true Jaccard.
enum class kind { base, exact, near, gray, far };
inline const char* kind_name(kind k) {
  constexpr const char* n[] = {"base", "exact", "near", "gray", "far"};
  return n[static_cast<int>(k)];
}

struct planted_doc {
  std::string text;
  kind k = kind::base;
  int base = -1;         // index of the original in planted::docs (-1 for a base)
  double jaccard = 1.0;  // true word-5-gram Jaccard with the original
};

struct planted_sizes {
  std::size_t bases = 1500, exact = 300, near = 600, appended = 150, far = 300;
};

// Bases: unrelated prose documents of 80-600 words. Then copies of random bases:
// exact (whitespace reshuffled), near (word edits aiming at J 0.76-1.0), appended
// (base plus 4-12% foreign text at the start or end), far (edits aiming at J 0.15-0.5).
// Every copy is labelled by its measured Jaccard: >= 0.8 near, < 0.55 far, else
// gray (neither must- nor must-not-match).
inline std::vector<planted_doc> make_planted(const std::vector<std::string>& texts, planted_sizes sz,
                                             std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto unrelated = unrelated_docs(texts, sz.bases + sz.appended, 80, 600, seed);
  std::vector<planted_doc> docs;
  for (std::size_t i = 0; i < sz.bases && i < unrelated.size(); ++i) docs.push_back({unrelated[i], kind::base, -1, 1.0});
  const std::size_t nb = docs.size();
  std::vector<std::string> vocab;
  for (std::size_t i = 0; i < nb; i += 7)
    for (auto& t : tokens(docs[i].text)) vocab.push_back(t);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto label = [&](std::string text, std::size_t b) {
    const double j = true_jaccard(oracle_shingles(text), oracle_shingles(docs[b].text));
    const kind k = j >= 0.8 ? kind::near : j < 0.55 ? kind::far : kind::gray;
    docs.push_back({std::move(text), k, static_cast<int>(b), j});
  };
  for (std::size_t i = 0; i < sz.exact; ++i) {
    const std::size_t b = rng() % nb;
    docs.push_back({respace(docs[b].text, rng), kind::exact, static_cast<int>(b), 1.0});
  }
  // Edit rate for a target Jaccard: an edit touches ~5 shingles, so a fraction
  // s = (1-p)^5 survives and J = s / (2 - s).
  auto rate_for = [](double j) { return 1.4 * (1.0 - std::pow(2 * j / (1 + j), 1.0 / 5)); };
  for (std::size_t i = 0; i < sz.near; ++i) {
    const std::size_t b = rng() % nb;
    label(edit_words(docs[b].text, rate_for(0.76 + 0.24 * u(rng)), vocab, rng), b);
  }
  for (std::size_t i = 0; i < sz.appended && nb + i < unrelated.size(); ++i) {
    const std::size_t b = rng() % nb;
    const auto base_tokens = tokens(docs[b].text);
    const auto extra = tokens(unrelated[nb + i]);
    const std::size_t want = std::max<std::size_t>(1, base_tokens.size() * (4 + rng() % 9) / 100);
    std::string add;
    for (std::size_t t = 0; t < std::min(want, extra.size()); ++t) add += extra[t] + ' ';
    label(rng() % 2 ? add + "\n" + docs[b].text : docs[b].text + "\n" + add, b);
  }
  for (std::size_t i = 0; i < sz.far; ++i) {
    const std::size_t b = rng() % nb;
    label(edit_words(docs[b].text, rate_for(0.15 + 0.35 * u(rng)), vocab, rng), b);
  }
  return docs;
}

}  // namespace loom::dedup::testing
