// Test and bench helpers for libs/textq (never linked into a service): a
// labelled corpus of our own making. clean_prose() writes grammatical English
// from a small grammar (agreement, articles, prepositions, per-document topic
// words); the bad kinds are keyword spam, web boilerplate, the words of clean
// prose shuffled, and machine-translation-like noise; paraphrase() makes a
// near copy by word substitutions, sentence reordering and light edits.
// Deterministic for a seed on any machine. Header-only; single-threaded use.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::textq::testing {

enum class kind { clean, spam, boilerplate, shuffled, mt_noise };
inline const char* kind_name(kind k) {
  switch (k) {
    case kind::clean: return "clean";
    case kind::spam: return "spam";
    case kind::boilerplate: return "boilerplate";
    case kind::shuffled: return "shuffled";
    case kind::mt_noise: return "mt_noise";
  }
  return "?";
}

namespace detail {

struct noun { const char* sg; const char* pl; };
struct verb { const char* base; const char* s3; const char* past; };

inline const std::vector<noun>& nouns() {
  static const std::vector<noun> v = {
      {"farmer", "farmers"}, {"teacher", "teachers"}, {"child", "children"}, {"river", "rivers"},
      {"village", "villages"}, {"market", "markets"}, {"bridge", "bridges"}, {"garden", "gardens"},
      {"road", "roads"}, {"house", "houses"}, {"letter", "letters"}, {"story", "stories"},
      {"city", "cities"}, {"mountain", "mountains"}, {"forest", "forests"}, {"engineer", "engineers"},
      {"doctor", "doctors"}, {"student", "students"}, {"machine", "machines"}, {"book", "books"},
      {"window", "windows"}, {"harbour", "harbours"}, {"boat", "boats"}, {"train", "trains"},
      {"station", "stations"}, {"kitchen", "kitchens"}, {"baker", "bakers"}, {"painter", "painters"},
      {"song", "songs"}, {"festival", "festivals"}, {"library", "libraries"}, {"museum", "museums"},
      {"field", "fields"}, {"storm", "storms"}, {"island", "islands"}, {"valley", "valleys"},
      {"council", "councils"}, {"worker", "workers"}, {"family", "families"}, {"neighbour", "neighbours"},
      {"tree", "trees"}, {"bird", "birds"}, {"horse", "horses"}, {"cart", "carts"},
      {"lamp", "lamps"}, {"clock", "clocks"}, {"wall", "walls"}, {"roof", "roofs"},
      {"fisherman", "fishermen"}, {"woman", "women"}, {"man", "men"}, {"sailor", "sailors"},
      {"map", "maps"}, {"school", "schools"}, {"church", "churches"}, {"shop", "shops"},
      {"lake", "lakes"}, {"hill", "hills"}, {"path", "paths"}, {"gate", "gates"},
      {"basket", "baskets"}, {"coat", "coats"}, {"friend", "friends"}, {"visitor", "visitors"},
  };
  return v;
}
inline const std::vector<verb>& verbs() {
  static const std::vector<verb> v = {
      {"carry", "carries", "carried"}, {"build", "builds", "built"}, {"open", "opens", "opened"},
      {"watch", "watches", "watched"}, {"repair", "repairs", "repaired"}, {"paint", "paints", "painted"},
      {"visit", "visits", "visited"}, {"follow", "follows", "followed"}, {"cross", "crosses", "crossed"},
      {"describe", "describes", "described"}, {"remember", "remembers", "remembered"},
      {"explain", "explains", "explained"}, {"clean", "cleans", "cleaned"}, {"prepare", "prepares", "prepared"},
      {"find", "finds", "found"}, {"bring", "brings", "brought"}, {"leave", "leaves", "left"},
      {"see", "sees", "saw"}, {"hear", "hears", "heard"}, {"keep", "keeps", "kept"},
      {"sell", "sells", "sold"}, {"buy", "buys", "bought"}, {"read", "reads", "read"},
      {"write", "writes", "wrote"}, {"draw", "draws", "drew"}, {"move", "moves", "moved"},
      {"protect", "protects", "protected"}, {"measure", "measures", "measured"},
      {"study", "studies", "studied"}, {"improve", "improves", "improved"}, {"share", "shares", "shared"},
      {"close", "closes", "closed"}, {"fill", "fills", "filled"}, {"lift", "lifts", "lifted"},
  };
  return v;
}
inline const std::vector<const char*>& adjectives() {
  static const std::vector<const char*> v = {
      "old", "new", "small", "large", "quiet", "bright", "careful", "simple", "heavy", "narrow",
      "wooden", "cold", "warm", "early", "late", "busy", "gentle", "patient", "tired", "famous",
      "distant", "green", "yellow", "broken", "clean", "crowded", "empty", "strong", "kind", "young",
      "ancient", "modest", "steep", "wide", "dark", "pleasant", "curious", "honest", "loud", "proud"};
  return v;
}
inline const std::vector<const char*>& adverbs() {
  static const std::vector<const char*> v = {"slowly", "quietly", "carefully", "often", "always",
                                             "sometimes", "never", "gladly", "quickly", "patiently",
                                             "rarely", "easily"};
  return v;
}
inline const std::vector<const char*>& preps() {
  static const std::vector<const char*> v = {"near", "behind", "across", "under", "along", "beside",
                                             "inside", "beyond", "above", "around", "towards"};
  return v;
}
inline const std::vector<const char*>& times() {
  static const std::vector<const char*> v = {
      "in the morning", "after the storm", "before winter", "every evening", "during the festival",
      "at noon", "on most days", "in the spring", "late at night", "after the harvest", "once a week",
      "in the summer"};
  return v;
}
inline const std::vector<const char*>& conj() {
  static const std::vector<const char*> v = {"because", "although", "while", "when", "since", "after"};
  return v;
}

inline std::string cap(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 32);
  return s;
}

// One document's vocabulary: a topic (subset of each pool) and made-up names.
struct topic {
  std::vector<noun> n;
  std::vector<verb> v;
  std::vector<const char*> a;
  std::vector<std::string> names;
};

template <class T>
std::vector<T> pick(const std::vector<T>& pool, std::size_t k, std::mt19937_64& rng) {
  std::vector<T> p = pool;
  std::shuffle(p.begin(), p.end(), rng);
  p.resize(std::min(k, p.size()));
  return p;
}

inline topic make_topic(std::mt19937_64& rng) {
  static const char* const syl[] = {"ma", "ri", "lo", "ten", "sa", "vin", "do", "ra", "kel", "an", "bre", "to"};
  topic t{pick(nouns(), 16, rng), pick(verbs(), 12, rng), pick(adjectives(), 12, rng), {}};
  for (int i = 0; i < 3; ++i) {
    std::string w;
    for (int k = 0, n = 2 + int(rng() % 2); k < n; ++k) w += syl[rng() % std::size(syl)];
    t.names.push_back(cap(w));
  }
  return t;
}

template <class T>
const T& any(const std::vector<T>& v, std::mt19937_64& rng) { return v[rng() % v.size()]; }

// A noun phrase; plural when pl. "the old farmer", "many children", "Marilo".
inline std::string np(const topic& t, bool pl, std::mt19937_64& rng) {
  std::string out;
  if (pl) {
    static const char* const det[] = {"the", "many", "some", "several", "our", "these"};
    out = det[rng() % std::size(det)];
  } else {
    static const char* const det[] = {"the", "a", "this", "every", "our", "that"};
    out = det[rng() % std::size(det)];
  }
  std::string adj = rng() % 2 ? any(t.a, rng) : "";
  if (!adj.empty()) {
    if (out == "a" && std::string_view("aeiou").find(adj[0]) != std::string_view::npos) out = "an";
    out += " " + adj;
  }
  const noun& n = any(t.n, rng);
  return out + " " + (pl ? n.pl : n.sg);
}

// One grammatical sentence, capitalised and ending in '.'.
inline std::string sentence(const topic& t, std::mt19937_64& rng) {
  const bool pl = rng() % 2;
  auto subj = [&](bool plural) { return !plural && rng() % 5 == 0 ? any(t.names, rng) : np(t, plural, rng); };
  auto vpres = [&](bool plural) { const verb& v = any(t.v, rng); return std::string(plural ? v.base : v.s3); };
  std::string s;
  switch (rng() % 8) {
    case 0: s = subj(pl) + " " + vpres(pl) + " " + np(t, rng() % 2, rng) + " " + any(preps(), rng) + " " + np(t, false, rng); break;
    case 1: s = subj(pl) + " " + vpres(pl) + " " + np(t, rng() % 2, rng) + " " + any(times(), rng); break;
    case 2: s = cap(any(times(), rng)) + ", " + subj(pl) + " " + any(t.v, rng).past + " " + np(t, rng() % 2, rng); break;
    case 3: s = subj(pl) + " " + any(t.v, rng).past + " " + np(t, false, rng) + " " + any(conj(), rng) + " " +
                subj(!pl) + " " + (pl ? "was" : "were") + " " + any(t.a, rng); break;
    case 4: s = std::string("It was a ") + any(t.a, rng) + " day, and " + np(t, true, rng) + " " +
                any(t.v, rng).past + " " + np(t, false, rng) + " " + any(preps(), rng) + " " + np(t, false, rng); break;
    case 5: s = std::string("When ") + subj(pl) + " " + vpres(pl) + " " + np(t, false, rng) + ", " + np(t, true, rng) +
                " " + any(adverbs(), rng) + " " + vpres(true) + " " + np(t, rng() % 2, rng); break;
    case 6: s = std::string("There ") + (pl ? "are " : "is ") + np(t, pl, rng) + " " + any(preps(), rng) + " " +
                np(t, false, rng) + ", and " + np(t, true, rng) + " " + any(adverbs(), rng) + " " + vpres(true) + (pl ? " them" : " it"); break;
    default: s = np(t, false, rng) + " of " + np(t, false, rng) + " " + any(t.v, rng).past + " that " + subj(pl) + " " +
                 (pl ? "were" : "was") + " " + any(t.a, rng); break;
  }
  return cap(s) + ".";
}

inline std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> w;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\n') ++j;
    if (j > i) w.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return w;
}

inline std::string join(const std::vector<std::string>& w, std::size_t per_line = 0) {
  std::string out;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (i) out += per_line && i % per_line == 0 ? '\n' : ' ';
    out += w[i];
  }
  return out;
}

}  // namespace detail

// Paragraphs of 4-6 grammatical sentences, blank lines between, >= `words`
// words (so the default Gopher rules, >= 50 words, pass it).
inline std::string clean_prose(std::uint64_t seed, std::size_t words = 120) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  const auto t = detail::make_topic(rng);
  std::string out;
  std::size_t n = 0;
  while (n < words) {
    if (!out.empty()) out += "\n\n";
    for (int k = 0, m = 4 + int(rng() % 3); k < m; ++k) {
      const std::string s = detail::sentence(t, rng);
      if (k) out += ' ';
      out += s;
      n += detail::split_words(s).size();
    }
  }
  return out;
}

// The words of clean_prose(seed) shuffled within each paragraph (punctuation
// and capitals travel with their words).
inline std::string shuffled_prose(std::uint64_t seed, std::size_t words = 120) {
  std::mt19937_64 rng(seed ^ 0x5348554646ull);
  const std::string src = clean_prose(seed, words);
  std::string out;
  std::size_t start = 0;
  while (start < src.size()) {
    std::size_t end = src.find("\n\n", start);
    if (end == std::string::npos) end = src.size();
    auto w = detail::split_words(std::string_view(src).substr(start, end - start));
    std::shuffle(w.begin(), w.end(), rng);
    if (!out.empty()) out += "\n\n";
    out += detail::join(w);
    start = end + 2;
  }
  return out;
}

// Machine-translation-like noise over clean_prose(seed): broken agreement
// (plural/singular and verb forms swapped), adjectives turned adverbs and back,
// function words dropped, doubled or moved, word-by-word substitutions.
inline std::string mt_noise(std::uint64_t seed, std::size_t words = 120) {
  std::mt19937_64 rng(seed ^ 0x4d544e4f495345ull);
  const std::string src = clean_prose(seed, words);
  auto w = detail::split_words(src);
  static const char* const fn[] = {"the", "a", "of", "to", "in", "on", "at", "for", "with", "is", "are", "was", "by"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < w.size(); ++i) {
    std::string x = w[i];
    std::string punct;
    while (!x.empty() && (x.back() == '.' || x.back() == ',')) { punct.insert(punct.begin(), x.back()); x.pop_back(); }
    const unsigned r = unsigned(rng() % 100);
    bool done = false;
    for (const auto& n : detail::nouns())
      if (!done && r < 55 && (x == n.sg || x == n.pl)) { x = x == n.sg ? n.pl : n.sg; done = true; }
    for (const auto& v : detail::verbs())
      if (!done && r < 55 && (x == v.base || x == v.s3 || x == v.past)) {
        const unsigned c = unsigned(rng() % 3);
        x = c == 0 ? std::string(v.base) + "ing" : c == 1 ? std::string("to ") + v.base : (x == v.s3 ? v.base : v.s3);
        done = true;
      }
    for (const char* a : detail::adjectives())
      if (!done && r < 40 && x == a) { x = std::string(a) + "ly"; done = true; }
    if (!done && r < 45 && std::find_if(std::begin(fn), std::end(fn), [&](const char* f) { return x == f; }) != std::end(fn)) {
      const unsigned c = unsigned(rng() % 3);
      if (c == 0) x = fn[rng() % std::size(fn)];                   // the wrong function word
      else if (c == 1 && i + 1 < w.size()) { std::swap(w[i], w[i + 1]); x = w[i]; }  // moved after its noun
      else x = x + " " + fn[rng() % std::size(fn)];               // doubled
      done = true;
    }
    if (!done && r >= 93) continue;  // dropped
    out.push_back(x + punct);
  }
  return detail::join(out, 14);
}

// Keyword stuffing and repeated promotional lines (some documents trip the
// repetition rules, most do not).
inline std::string spam(std::uint64_t seed, std::size_t words = 120) {
  std::mt19937_64 rng(seed ^ 0x5350414dull);
  static const char* const product[] = {"watches", "shoes", "loans", "phones", "sunglasses", "vitamins", "tickets", "bags"};
  static const char* const kw[] = {"cheap", "best", "discount", "buy", "online", "free", "shipping", "deal",
                                   "sale", "offer", "price", "top", "quality", "now", "official", "store", "order"};
  static const char* const promo[] = {"Click here to get the best deal today!", "Limited offer, buy now and save 70%!",
                                      "Free shipping on all orders, order now!", "Best price guaranteed, visit our store!",
                                      "Don't miss this amazing offer, act now!"};
  const std::string p1 = product[rng() % std::size(product)], p2 = product[rng() % std::size(product)];
  std::string out;
  std::size_t n = 0;
  const bool repeat_promo = rng() % 3 == 0;
  const std::string line = promo[rng() % std::size(promo)];
  while (n < words) {
    std::vector<std::string> s;
    for (int k = 0, m = 8 + int(rng() % 10); k < m; ++k) {
      const unsigned r = unsigned(rng() % 10);
      s.push_back(r < 3 ? (rng() % 2 ? p1 : p2) : r < 5 ? std::string(rng() % 3 ? "the" : rng() % 2 ? "and" : "with")
                                                         : kw[rng() % std::size(kw)]);
    }
    s[0] = detail::cap(s[0]);
    std::string sent = detail::join(s) + (rng() % 2 ? "." : "!");
    out += out.empty() ? "" : rng() % 3 ? " " : "\n";
    out += sent;
    n += s.size();
    if (repeat_promo || rng() % 4 == 0) { out += "\n" + line + "\n"; n += 7; }
  }
  return out;
}

// Navigation bars, cookie banners, legal footers and newsletter prompts.
inline std::string boilerplate(std::uint64_t seed, std::size_t words = 120) {
  std::mt19937_64 rng(seed ^ 0x424f494cull);
  static const char* const co[] = {"Example", "Northwind", "Acme", "Globex", "Initech", "Umbrella", "Contoso"};
  static const char* const nav[] = {"Home", "About Us", "Contact", "Blog", "Shop", "Careers", "Support", "News",
                                    "Products", "Services", "FAQ", "Login", "Register", "Search"};
  static const char* const lines[] = {
      "We use cookies to give you the best experience on our website.",
      "By continuing to use this site you agree to the use of cookies.",
      "You can change your cookie settings at any time in your browser.",
      "All rights reserved.", "Terms of Service", "Privacy Policy", "Accessibility Statement",
      "Subscribe to our newsletter to receive the latest news and offers.",
      "Enter your email address to sign up.", "Follow us on social media.",
      "This website is operated by the company named above and its affiliates.",
      "Please read these terms carefully before using the service.",
      "The content of this page is for general information only and is subject to change without notice.",
      "Accept all cookies", "Manage preferences", "Back to top", "Skip to main content",
      "Your use of this website is subject to the following terms of use.",
      "We may update this policy from time to time."};
  const std::string c = co[rng() % std::size(co)];
  std::string out;
  std::size_t n = 0;
  while (n < words) {
    std::string l;
    switch (rng() % 4) {
      case 0:
        for (int k = 0, m = 4 + int(rng() % 5); k < m; ++k) l += std::string(k ? (rng() % 2 ? " | " : " ") : "") + nav[rng() % std::size(nav)];
        break;
      case 1: l = "Copyright " + std::to_string(2000 + rng() % 25) + " " + c + " Ltd. All rights reserved."; break;
      default: l = lines[rng() % std::size(lines)]; break;
    }
    n += detail::split_words(l).size();
    out += (out.empty() ? "" : rng() % 2 ? "\n" : " ") + l;
  }
  return out;
}

inline std::string make(kind k, std::uint64_t seed, std::size_t words = 120) {
  switch (k) {
    case kind::clean: return clean_prose(seed, words);
    case kind::spam: return spam(seed, words);
    case kind::boilerplate: return boilerplate(seed, words);
    case kind::shuffled: return shuffled_prose(seed, words);
    case kind::mt_noise: return mt_noise(seed, words);
  }
  return {};
}

struct labelled {
  std::string text;
  kind k = kind::clean;
  bool good() const { return k == kind::clean; }
};

// n_good clean documents and n_bad of each bad kind, seeds from seed_base on
// (use disjoint bases for train and held-out sets), lengths 80..200 words.
inline std::vector<labelled> labelled_set(std::uint64_t seed_base, int n_good, int n_bad_each) {
  std::vector<labelled> out;
  std::mt19937_64 rng(seed_base);
  auto words = [&] { return std::size_t(80 + rng() % 121); };
  for (int i = 0; i < n_good; ++i) out.push_back({clean_prose(seed_base + 1000003u * 1 + std::uint64_t(i), words()), kind::clean});
  for (kind k : {kind::spam, kind::boilerplate, kind::shuffled, kind::mt_noise})
    for (int i = 0; i < n_bad_each; ++i)
      out.push_back({make(k, seed_base + 1000003u * (2 + std::uint64_t(k)) + std::uint64_t(i), words()), k});
  return out;
}

// A near copy: about `subst` of the content words replaced by another word of
// the same class (nouns by nouns, verbs by verbs, adjectives by adjectives),
// sentences of each paragraph rotated, and a word dropped now and then.
inline std::string paraphrase(std::string_view text, std::uint64_t seed, double subst = 0.25) {
  std::mt19937_64 rng(seed ^ 0x50415241ull);
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find("\n\n", start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view para = text.substr(start, end - start);
    std::vector<std::string> sentences;  // split after ". "
    std::size_t s0 = 0;
    for (std::size_t i = 0; i < para.size(); ++i)
      if (para[i] == '.' && (i + 1 == para.size() || para[i + 1] == ' ')) {
        sentences.emplace_back(para.substr(s0, i + 1 - s0));
        s0 = i + 2;
      }
    if (s0 < para.size()) sentences.emplace_back(para.substr(s0));
    if (sentences.size() > 1) std::rotate(sentences.begin(), sentences.begin() + 1 + rng() % (sentences.size() - 1), sentences.end());
    std::vector<std::string> words;
    for (const auto& s : sentences)
      for (auto& w : detail::split_words(s)) words.push_back(std::move(w));
    std::vector<std::string> kept;
    for (auto& w : words) {
      std::string core = w, punct;
      while (!core.empty() && (core.back() == '.' || core.back() == ',')) { punct.insert(punct.begin(), core.back()); core.pop_back(); }
      const bool capital = !core.empty() && core[0] >= 'A' && core[0] <= 'Z';
      std::string low = core;
      if (capital) low[0] = static_cast<char>(low[0] + 32);
      if (std::uniform_real_distribution<double>(0, 1)(rng) < subst) {
        for (const auto& n : detail::nouns())
          if (low == n.sg) { low = detail::any(detail::nouns(), rng).sg; break; }
          else if (low == n.pl) { low = detail::any(detail::nouns(), rng).pl; break; }
        for (const char* a : detail::adjectives())
          if (low == a) { low = detail::any(detail::adjectives(), rng); break; }
      }
      if (punct.empty() && rng() % 40 == 0) continue;  // light edit: a word dropped
      kept.push_back((capital ? detail::cap(low) : low) + punct);
    }
    if (!out.empty()) out += "\n\n";
    out += detail::join(kept);
    start = end + 2;
  }
  return out;
}

}  // namespace loom::textq::testing
