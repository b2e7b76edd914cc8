#include "services/trainer/align/synthetic_prefs.hpp"

#include <cctype>
#include <random>
#include <set>

namespace loom::align {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The prompt's word ("shout apple" -> "apple").
std::string word_of(const std::string& prompt) {
  const std::size_t sp = prompt.rfind(' ');
  return sp == std::string::npos ? prompt : prompt.substr(sp + 1);
}

}  // namespace

preference_split synthetic_preferences(const synthetic_options& o) {
  std::mt19937_64 rng(o.seed);
  std::set<std::string> used;
  auto fresh_word = [&] {
    for (;;) {
      const int n = 3 + int(rng() % 4);
      std::string w;
      for (int i = 0; i < n; ++i) w += char('a' + rng() % 26);
      if (used.insert(w).second) return w;
    }
  };
  auto make = [&](int n, std::vector<preference_record>& out) {
    for (int i = 0; i < n; ++i) {
      const std::string w = fresh_word();
      std::string rejected;
      switch (rng() % 3) {
        case 0: rejected = w + "!"; break;                  // case rule broken
        case 1: rejected = upper(w) + "."; break;           // format rule broken
        default: rejected = upper(fresh_word()) + "!"; break;  // keyword rule broken: another word
      }
      out.push_back({"shout " + w, upper(w) + "!", rejected});
    }
  };
  preference_split s;
  make(o.train_pairs, s.train);
  make(o.held_out_pairs, s.held_out);
  return s;
}

render_options synthetic_render() { return {"", ": ", '\n'}; }

std::vector<preference_record> synthetic_warmup(const preference_split& s) {
  std::vector<preference_record> out;
  for (const auto& r : s.train) {
    const std::string w = word_of(r.prompt), W = upper(w);
    out.push_back({r.prompt, W + "!", w + "."});
    out.push_back({r.prompt, w + "!", W + "."});
  }
  return out;
}

double synthetic_rule_score(const std::string& prompt, const std::string& response) {
  const std::string w = word_of(prompt);
  if (w.empty()) return 0.0;
  double letters = 0;  // per position: ½ for the right letter, 1 for it in capitals
  for (std::size_t i = 0; i < w.size() && i < response.size(); ++i) {
    const char c = response[i];
    if (std::tolower(static_cast<unsigned char>(c)) != w[i]) continue;
    letters += std::isupper(static_cast<unsigned char>(c)) ? 1.0 : 0.5;
  }
  const bool bang = response.size() == w.size() + 1 && response.back() == '!';
  return 0.5 * letters / double(w.size()) + (bang ? 0.5 : 0.0);
}

double synthetic_format_score(const std::string& response) {
  if (response.empty() || response.size() > 8) return 0.0;
  const std::size_t body = response.size() - 1;
  int caps = 0;
  for (std::size_t i = 0; i < body; ++i) caps += std::isupper(static_cast<unsigned char>(response[i])) ? 1 : 0;
  return (body ? 0.5 * caps / double(body) : 0.0) + (response.back() == '!' ? 0.5 : 0.0);
}

}  // namespace loom::align
