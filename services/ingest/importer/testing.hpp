// Test and bench helpers for the importer (never linked into the service):
//   prose(seed, words)  clean English-like text, unique per seed, that passes the
//                       default quality rules and that cleaning leaves unchanged;
//   debian_corpus       real prose from /usr/share/common-licenses and
//                       /usr/share/doc/*/copyright, cut into paragraphs and
//                       reassembled into varied documents (JSONL and text files)
//                       for the memory-budget test and ingest_bench.
// Deterministic for a seed on one machine. Header-only; single-threaded use.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace loom::ingest::importer_testing {

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, std::string_view data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// Sentences of common English words and per-seed made-up words, 12 words a line,
// a blank line every 4 sentences, ASCII only, no double spaces or trailing blanks.
inline std::string prose(std::uint64_t seed, std::size_t words) {
  static const char* const common[] = {
      "the",   "of",    "and",    "to",    "in",     "that",  "with",   "for",    "was",    "on",
      "as",    "by",    "from",   "which", "people", "water", "village", "river",  "morning", "evening",
      "house", "road",  "market", "school", "garden", "letter", "winter", "summer", "music",  "bridge",
      "small", "large", "early",  "quiet", "bright", "old",    "new",    "simple", "careful", "local"};
  static const char* const syllables[] = {"ba", "ter", "con", "ri",  "mo", "pre", "sta", "tion", "al", "ing",
                                          "ver", "de", "li",  "ous", "an", "ex",  "pro", "ment", "com", "di"};
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 17);
  std::vector<std::string> own;  // this document's content words
  for (int i = 0; i < 60; ++i) {
    std::string w;
    for (int k = 0, n = 2 + static_cast<int>(rng() % 3); k < n; ++k) w += syllables[rng() % std::size(syllables)];
    own.push_back(std::move(w));
  }
  std::string out;
  std::size_t n = 0;
  while (n < words) {
    if (!out.empty()) out += "\n\n";
    std::size_t in_para = 0;  // words in this paragraph
    for (int sentence = 0; sentence < 4; ++sentence) {
      const std::size_t len = 8 + rng() % 8;
      for (std::size_t k = 0; k < len; ++k) {
        std::string w = rng() % 2 ? common[rng() % std::size(common)] : own[rng() % own.size()];
        if (k == 0) w[0] = static_cast<char>(w[0] - 'a' + 'A');
        if (k + 1 == len) w += '.';
        if (in_para > 0) out += in_para % 12 == 0 ? '\n' : ' ';
        out += w;
        ++in_para;
        ++n;
      }
    }
  }
  return out;
}

// JSON string literal of `s` (quotes included).
inline std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// Distinct paragraphs (> 80 bytes) of Debian's licence and copyright texts.
inline std::vector<std::string> debian_paragraphs() {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses", ec))
    if (e.is_regular_file() && !e.is_symlink()) paths.push_back(e.path().string());
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/doc", ec)) {
    const auto p = e.path() / "copyright";
    if (std::filesystem::is_regular_file(p, ec)) paths.push_back(p.string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const auto& p : paths) {
    const std::string t = slurp(p);
    std::size_t start = 0;
    while (start < t.size()) {
      std::size_t end = t.find("\n\n", start);
      if (end == std::string::npos) end = t.size();
      std::string para = t.substr(start, end - start);
      if (para.size() > 80 && seen.insert(para).second) out.push_back(std::move(para));
      start = end + 2;
    }
  }
  return out;
}

// Varied documents of real prose: distinct paragraphs of the pool in random
// order with ~4% of their words replaced by words from elsewhere in the pool, so
// neither exact nor near dedup removes much.
class debian_prose {
 public:
  explicit debian_prose(std::uint64_t seed) : pool_(debian_paragraphs()), rng_(seed) {
    for (std::size_t i = 0; i < pool_.size(); i += 5) {
      std::istringstream in(pool_[i]);
      std::string w;
      while (in >> w) vocab_.push_back(w);
    }
  }

  // Whole paragraphs until at least `target` bytes.
  std::string document(std::size_t target) {
    std::string doc;
    used_.clear();
    while (doc.size() < target) {
      const std::size_t k = rng_() % pool_.size();
      if (!used_.insert(k).second) continue;
      const std::string& p = pool_[k];
      std::size_t pos = 0;
      while (pos < p.size()) {  // word by word, replacing some
        std::size_t end = p.find_first_of(" \n", pos);
        if (end == std::string::npos) end = p.size();
        if (end > pos && rng_() % 25 == 0) doc += vocab_[rng_() % vocab_.size()];
        else doc.append(p, pos, end - pos);
        if (end < p.size()) doc += p[end];
        pos = end + 1;
      }
      doc += "\n\n";
    }
    return doc;
  }
  std::uint64_t next(std::uint64_t bound) { return rng_() % bound; }

 private:
  std::vector<std::string> pool_, vocab_;
  std::mt19937_64 rng_;
  std::unordered_set<std::size_t> used_;
};

// Writes about `bytes` of debian_prose documents under `dir`: JSONL files of ~8 MB
// ({"text":..} records of min_doc..max_doc bytes, at least; whole paragraphs) and,
// every fourth file, a plain text file of ~200 KB. Returns the bytes of text written.
inline std::uint64_t write_debian_corpus(const std::string& dir, std::uint64_t bytes, std::uint64_t seed,
                                         std::size_t min_doc = 1024, std::size_t max_doc = 16 * 1024) {
  debian_prose gen(seed);
  std::uint64_t written = 0;
  for (int file = 0; written < bytes; ++file) {
    char name[64];
    std::string out;
    if (file % 4 == 3) {
      std::snprintf(name, sizeof name, "/part-%04d.txt", file);
      out = gen.document(200'000);
      written += out.size();
    } else {
      std::snprintf(name, sizeof name, "/part-%04d.jsonl", file);
      while (out.size() < 8'000'000 && written < bytes) {
        const std::string d = gen.document(min_doc + gen.next(max_doc - min_doc + 1));
        written += d.size();
        out += "{\"text\": " + json_quote(d) + "}\n";
      }
    }
    write_file(dir + name, out);
  }
  return written;
}

}  // namespace loom::ingest::importer_testing
