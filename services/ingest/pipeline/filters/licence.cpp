#include "services/ingest/pipeline/filters/licence.hpp"

#include "services/ingest/pipeline/filters/licence_table.hpp"
#include "services/ingest/pipeline/utf8.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>

namespace loom::ingest {
namespace {

using sv = std::string_view;

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Positions of an ASCII lower-case needle, case-insensitively.
std::size_t ci_find(sv hay, sv needle, std::size_t from = 0) {
  if (needle.empty() || hay.size() < needle.size()) return sv::npos;
  const char f = needle[0];
  for (std::size_t i = from; i + needle.size() <= hay.size(); ++i) {
    if (lower(hay[i]) != f) continue;
    std::size_t k = 1;
    while (k < needle.size() && lower(hay[i + k]) == needle[k]) ++k;
    if (k == needle.size()) return i;
  }
  return sv::npos;
}

constexpr std::array<char, 256> alnum_lower = [] {
  std::array<char, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = static_cast<char>(c);
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = static_cast<char>(c - 'A' + 'a');
  for (int c = '0'; c <= '9'; ++c) t[c] = static_cast<char>(c);
  return t;
}();

void normalise(sv in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  bool sep = false;
  for (unsigned char c : in) {
    const char l = alnum_lower[c];
    if (l) {
      if (sep && !out.empty()) out += ' ';
      sep = false;
      out += l;
    } else {
      sep = true;
    }
  }
}

struct collector {
  std::vector<licence_match>& out;
  void add(std::string id, licence_evidence e) {
    for (auto& m : out)
      if (m.id == id) {
        if (e < m.evidence) m.evidence = e;
        return;
      }
    out.push_back({std::move(id), e});
  }
};

bool is_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '+' || c == ':';
}

// "SPDX-License-Identifier: (MIT OR Apache-2.0) AND BSD-3-Clause WITH x" -> MIT, Apache-2.0, BSD-3-Clause.
void spdx_tags(sv text, collector& c) {
  constexpr sv tag = "spdx-license-identifier";
  for (std::size_t p = ci_find(text, tag); p != sv::npos; p = ci_find(text, tag, p + tag.size())) {
    std::size_t e = text.find('\n', p);
    sv expr = text.substr(p + tag.size(), e == sv::npos ? sv::npos : e - p - tag.size());
    bool skip_next = false;
    std::size_t i = 0;
    while (i < expr.size()) {
      if (!is_id_char(expr[i])) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < expr.size() && is_id_char(expr[j])) ++j;
      sv tok = expr.substr(i, j - i);
      i = j;
      while (!tok.empty() && (tok.back() == '.' || tok.back() == ':')) tok.remove_suffix(1);
      if (tok.empty()) continue;
      std::string up(tok);
      for (auto& ch : up) ch = static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 32 : ch);
      if (up == "AND" || up == "OR") continue;
      if (up == "WITH") {
        skip_next = true;  // an exception, not a licence
        continue;
      }
      if (skip_next) {
        skip_next = false;
        continue;
      }
      c.add(std::string(tok), licence_evidence::spdx_tag);
    }
  }
}

// Every phrase the scan looks for: the fingerprints' and the notices' leads.
// Matching happens at word starts of the normalised text: a 5-byte key picks
// the candidate phrases, a compare confirms them. One pass, whatever the count.
constexpr sv gnu_phrases[] = {
    "gnu general public license as published by the free software foundation",
    "gnu lesser general public license as published by the free software foundation",
    "gnu library general public license as published by the free software foundation",
    "gnu affero general public license as published by the free software foundation",
};
constexpr sv gnu_bases[] = {"GPL", "LGPL", "LGPL", "AGPL"};
constexpr sv cc_phrases[] = {"creative commons attribution", "cc by"};
struct phrase_id {
  sv text, id;
};
constexpr phrase_id other_phrases[] = {
    {"licensed under the apache license version 2 0", "Apache-2.0"},
    {"under the mit license", "MIT"},
    {"subject to the terms of the mozilla public license v 2 0", "MPL-2.0"},
    {"bsd 3 clause license", "BSD-3-Clause"},
    {"bsd 2 clause license", "BSD-2-Clause"},
    {"cc0 1 0", "CC0-1.0"},
};
constexpr std::size_t key_bytes = 5;  // the shortest phrase ("cc by")

std::uint64_t key_at(sv s, std::size_t i) {
  std::uint64_t k = 0;
  for (std::size_t j = 0; j < key_bytes; ++j) k = (k << 8) | (i + j < s.size() ? static_cast<unsigned char>(s[i + j]) : 0);
  return k;
}

struct phrase_index {
  std::vector<sv> phrases;
  std::unordered_map<std::uint64_t, std::vector<std::uint16_t>> by_key;
  std::vector<std::uint8_t> filter = std::vector<std::uint8_t>(1 << 16);  // a key's hash seen: cheap first test

  static std::size_t slot(std::uint64_t k) { return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ULL) >> 48); }
  std::uint16_t add(sv p) {
    for (std::size_t i = 0; i < phrases.size(); ++i)
      if (phrases[i] == p) return static_cast<std::uint16_t>(i);
    phrases.push_back(p);
    auto id = static_cast<std::uint16_t>(phrases.size() - 1);
    by_key[key_at(p, 0)].push_back(id);
    filter[slot(key_at(p, 0))] = 1;
    return id;
  }
  std::uint16_t id(sv p) const {
    for (std::size_t i = 0; i < phrases.size(); ++i)
      if (phrases[i] == p) return static_cast<std::uint16_t>(i);
    return 0xFFFF;
  }
};

const phrase_index& index() {
  static const phrase_index idx = [] {
    phrase_index x;
    for (const auto& fp : detail::licence_fingerprints()) {
      for (sv p : fp.all) x.add(p);
      for (sv p : fp.none) x.add(p);
    }
    for (sv p : gnu_phrases) x.add(p);
    for (sv p : cc_phrases) x.add(p);
    for (const auto& p : other_phrases) x.add(p.text);
    return x;
  }();
  return idx;
}

// (phrase id, position) of every phrase occurrence at a word start of `n`.
void find_phrases(sv n, std::vector<std::pair<std::uint16_t, std::uint32_t>>& hits) {
  const phrase_index& idx = index();
  hits.clear();
  std::size_t i = 0;
  while (i < n.size()) {
    const std::uint64_t k = key_at(n, i);
    if (idx.filter[phrase_index::slot(k)]) {
      auto it = idx.by_key.find(k);
      if (it != idx.by_key.end())
        for (std::uint16_t id : it->second)
          if (n.compare(i, idx.phrases[id].size(), idx.phrases[id]) == 0)
            hits.emplace_back(id, static_cast<std::uint32_t>(i));
    }
    const void* sp = std::memchr(n.data() + i, ' ', n.size() - i);
    if (!sp) break;
    i = static_cast<std::size_t>(static_cast<const char*>(sp) - n.data()) + 1;
  }
}

struct phrase_hits {
  const std::vector<std::pair<std::uint16_t, std::uint32_t>>& hits;
  bool has(sv p) const {
    std::uint16_t id = index().id(p);
    for (const auto& h : hits)
      if (h.first == id) return true;
    return false;
  }
  std::vector<std::uint32_t> at(sv p) const {
    std::uint16_t id = index().id(p);
    std::vector<std::uint32_t> out;
    for (const auto& h : hits)
      if (h.first == id) out.push_back(h.second);
    return out;
  }
};

void full_texts(const phrase_hits& h, collector& c) {
  std::vector<sv> suppressed;
  std::vector<licence_match> found;
  for (const auto& fp : detail::licence_fingerprints()) {
    bool ok = std::all_of(fp.all.begin(), fp.all.end(), [&](sv p) { return h.has(p); }) &&
              std::none_of(fp.none.begin(), fp.none.end(), [&](sv p) { return h.has(p); });
    if (!ok) continue;
    found.push_back({std::string(fp.id), licence_evidence::full_text});
    suppressed.insert(suppressed.end(), fp.suppresses.begin(), fp.suppresses.end());
  }
  for (auto& m : found)
    if (std::find(suppressed.begin(), suppressed.end(), m.id) == suppressed.end()) c.add(m.id, m.evidence);
}

// "... GNU General Public License as published by the Free Software Foundation;
// either version 2 of the License, or (at your option) any later version."
void gnu_notices(sv n, const phrase_hits& h, collector& c) {
  for (std::size_t f = 0; f < std::size(gnu_phrases); ++f) {
    for (std::uint32_t p : h.at(gnu_phrases[f])) {
      sv w = n.substr(p + gnu_phrases[f].size(), 160);
      std::size_t v = w.find("version ");
      if (v == sv::npos) continue;
      sv rest = w.substr(v + 8);
      if (rest.empty() || rest[0] < '1' || rest[0] > '3') continue;
      std::string ver(1, rest[0]);
      ver += (rest.substr(1, 2) == " 1" && rest[0] == '2' && gnu_bases[f] == "LGPL") ? ".1" : ".0";
      bool later = w.find("any later version") != sv::npos || w.find("or later") != sv::npos;
      c.add(std::string(gnu_bases[f]) + "-" + ver + (later ? "-or-later" : "-only"), licence_evidence::notice);
    }
  }
}

// "licensed under a Creative Commons Attribution-NonCommercial-ShareAlike 4.0 ..." / "CC BY-SA 4.0".
void cc_notices(sv n, const phrase_hits& h, collector& c) {
  for (sv lead : cc_phrases) {
    for (std::uint32_t p : h.at(lead)) {
      std::size_t i = p + lead.size();
      bool nc = false, sa = false, nd = false;
      std::string version;
      for (int words = 0; words < 8 && i < n.size(); ++words) {
        if (n[i] == ' ') ++i;
        std::size_t j = n.find(' ', i);
        sv w = n.substr(i, j == sv::npos ? sv::npos : j - i);
        i = j == sv::npos ? n.size() : j;
        if (w == "noncommercial" || w == "nc") nc = true;
        else if (w == "sharealike" || w == "sa" || w == "share" || w == "alike") sa = true;
        else if (w == "noderivatives" || w == "noderivs" || w == "nd" || w == "no" || w == "derivatives") nd = true;
        else if (w.size() == 1 && w[0] >= '1' && w[0] <= '4' && i + 2 <= n.size() && n[i] == ' ' &&
                 n[i + 1] >= '0' && n[i + 1] <= '9' && (i + 2 == n.size() || n[i + 2] == ' ')) {
          version = std::string(w) + "." + n[i + 1];
          break;
        } else if (w != "international" && w != "license" && w != "licence" && w != "unported") {
          break;
        }
      }
      if (version.empty()) continue;
      std::string id = "CC-BY";
      if (nc) id += "-NC";
      if (nd) id += "-ND";
      else if (sa) id += "-SA";
      c.add(id + "-" + version, licence_evidence::notice);
    }
  }
}

void other_notices(const phrase_hits& h, collector& c) {
  for (const auto& p : other_phrases)
    if (h.has(p.text)) c.add(std::string(p.id), licence_evidence::notice);
}

// ---- copyright notices ----

bool year_at(sv s, std::size_t i) {
  if (i + 4 > s.size()) return false;
  if (!((s[i] == '1' && s[i + 1] == '9') || (s[i] == '2' && s[i + 1] == '0'))) return false;
  return s[i + 2] >= '0' && s[i + 2] <= '9' && s[i + 3] >= '0' && s[i + 3] <= '9';
}

std::size_t skip_blanks(sv s, std::size_t i, bool colon = false) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || (colon && s[i] == ':'))) ++i;
  return i;
}

// Is `line` a copyright notice? "Copyright (c) 2020 X", "Copyright 2020 X", "© 2020 X", "(C) 2019 X".
bool is_copyright_line(sv line) {
  constexpr sv copy = "\xC2\xA9";  // ©
  auto strong_mark = [&](std::size_t i) -> std::size_t {  // length of "(c)" or "©" at i
    if (line.substr(i, 2) == copy) return 2;
    if (i + 3 <= line.size() && line[i] == '(' && lower(line[i + 1]) == 'c' && line[i + 2] == ')') return 3;
    return 0;
  };
  for (std::size_t p = ci_find(line, "copyright"); p != sv::npos; p = ci_find(line, "copyright", p + 9)) {
    if (p > 0 && alnum_lower[static_cast<unsigned char>(line[p - 1])]) continue;
    std::size_t i = skip_blanks(line, p + 9, true);
    if (strong_mark(i) > 0 || year_at(line, i)) return true;
  }
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (std::size_t m = strong_mark(i); m && year_at(line, skip_blanks(line, i + m))) return true;
  }
  return false;
}

// The notice without comment marks around it ("//", "#", " * ", "<!--", "-->").
std::string notice_text(sv line) {
  auto lead = [](char c) { return c == ' ' || c == '\t' || c == '/' || c == '*' || c == '#' || c == ';' || c == '%' || c == '-'; };
  auto trail = [](char c) { return c == ' ' || c == '\t' || c == '/' || c == '*'; };
  for (bool again = true; again;) {
    again = false;
    while (!line.empty() && lead(line.front())) line.remove_prefix(1);
    if (line.substr(0, 4) == "<!--") {
      line.remove_prefix(4);
      again = true;
    }
  }
  for (bool again = true; again;) {
    again = false;
    while (!line.empty() && trail(line.back())) line.remove_suffix(1);
    if (line.size() >= 3 && line.substr(line.size() - 3) == "-->") {
      line.remove_suffix(3);
      again = true;
    }
  }
  return std::string(utf8::truncate(line, 200));
}

void scan_copyrights(sv text, licence_findings& f) {
  std::vector<std::size_t> hits;
  for (std::size_t p = ci_find(text, "copyright"); p != sv::npos; p = ci_find(text, "copyright", p + 9)) hits.push_back(p);
  for (std::size_t p = text.find("\xC2\xA9"); p != sv::npos; p = text.find("\xC2\xA9", p + 2)) hits.push_back(p);
  for (std::size_t p = ci_find(text, "(c)"); p != sv::npos; p = ci_find(text, "(c)", p + 3)) hits.push_back(p);
  if (hits.empty()) return;
  std::sort(hits.begin(), hits.end());
  std::size_t counted_to = 0, line_no = 1, done_line_end = 0;
  bool any_done = false;
  for (std::size_t h : hits) {
    if (any_done && h < done_line_end) continue;  // this line was looked at
    line_no += static_cast<std::size_t>(std::count(text.begin() + counted_to, text.begin() + h, '\n'));
    counted_to = h;
    std::size_t b = text.rfind('\n', h);
    b = b == sv::npos ? 0 : b + 1;
    std::size_t e = text.find('\n', h);
    if (e == sv::npos) e = text.size();
    any_done = true;
    done_line_end = e;
    sv line = text.substr(b, e - b);
    if (!is_copyright_line(line)) continue;
    ++f.copyright_lines;
    if (f.copyrights.size() < licence_scanner::max_copyrights)
      f.copyrights.push_back({static_cast<std::uint32_t>(line_no), notice_text(line)});
  }
}

bool might_mention_licence(sv text) {
  return ci_find(text, "licen") != sv::npos || ci_find(text, "copyright") != sv::npos ||
         text.find("\xC2\xA9") != sv::npos || ci_find(text, "public domain") != sv::npos ||
         ci_find(text, "cc0") != sv::npos || ci_find(text, "cc by") != sv::npos;
}

std::string upper(sv s) {
  std::string r(s);
  for (auto& c : r)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return r;
}

// GPL-2.0+ == GPL-2.0-or-later (the deprecated spelling).
std::string canonical(sv id) {
  std::string u = upper(id);
  if (!u.empty() && u.back() == '+') u = u.substr(0, u.size() - 1) + "-OR-LATER";
  return u;
}

}  // namespace

std::string_view to_string(licence_evidence e) {
  switch (e) {
    case licence_evidence::full_text: return "full_text";
    case licence_evidence::spdx_tag: return "spdx_tag";
    case licence_evidence::notice: return "notice";
  }
  return "unknown";
}

licence_findings licence_scanner::scan(std::string_view text) {
  licence_findings f;
  if (!might_mention_licence(text)) return f;
  collector c{f.licences};
  normalise(text, norm_);
  find_phrases(norm_, hits_);
  const phrase_hits h{hits_};
  full_texts(h, c);
  spdx_tags(text, c);
  gnu_notices(norm_, h, c);
  cc_notices(norm_, h, c);
  other_notices(h, c);
  // A full text's own "how to apply" section is not a separate notice.
  std::vector<std::string> texts;
  for (const auto& m : f.licences)
    if (m.evidence == licence_evidence::full_text) texts.push_back(m.id + "-");
  std::erase_if(f.licences, [&](const licence_match& m) {
    return m.evidence == licence_evidence::notice &&
           std::any_of(texts.begin(), texts.end(), [&](const std::string& t) { return m.id.rfind(t, 0) == 0; });
  });
  std::stable_sort(f.licences.begin(), f.licences.end(),
                   [](const licence_match& a, const licence_match& b) { return a.evidence < b.evidence; });
  scan_copyrights(text, f);
  return f;
}

std::vector<std::string_view> known_licence_ids() {
  std::vector<std::string_view> ids;
  for (const auto& fp : detail::licence_fingerprints()) ids.push_back(fp.id);
  return ids;
}

bool licence_id_matches(std::string_view pattern, std::string_view id) {
  std::string p = canonical(pattern), i = canonical(id);
  if (!p.empty() && p.back() == '*') return i.rfind(p.substr(0, p.size() - 1), 0) == 0;
  return i == p || i == p + "-ONLY" || i == p + "-OR-LATER";
}

std::optional<std::string> denied_licence(const licence_findings& f, const licence_policy& p) {
  if (p.action != licence_policy::mode::deny) return std::nullopt;
  for (const auto& m : f.licences)
    for (const auto& d : p.deny)
      if (licence_id_matches(d, m.id)) return m.id + " (" + std::string(to_string(m.evidence)) + ")";
  return std::nullopt;
}

}  // namespace loom::ingest
