// synthetic_prefs: a preference set of our own making, deterministic under a
// seed, where the chosen answer follows a rule that the rejected one breaks:
//   prompt  "shout <word>"                 (<word>: 3–6 random lower-case letters)
//   chosen  "<WORD>!"                      (the word in capitals, then '!')
//   rejected "<word>!" (case rule broken) or "<WORD>." (format rule broken), half each
// Held-out pairs use words the training pairs never contain. The SFT-ish
// warm-up text answers every prompt in all four variants alike, so a model
// trained on it prefers neither answer (preference accuracy about ½).
// Pure functions; any thread.
#pragma once

#include "services/trainer/align/preference_data.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::align {

struct synthetic_options {
  int train_pairs = 512;
  int held_out_pairs = 128;
  std::uint64_t seed = 1;
};

struct preference_split {
  std::vector<preference_record> train, held_out;
};

preference_split synthetic_preferences(const synthetic_options& o);

// The rendering the tiny byte-level models use: "shout apple: APPLE!\n".
render_options synthetic_render();

// The warm-up records: for each training prompt, its four answers
// (WORD!, word!, WORD., word.) as (prompt, answer) pairs in chosen/rejected
// slots, so SFT on both slots teaches the format and no preference.
std::vector<preference_record> synthetic_warmup(const preference_split& s);

// The rule as a graded score in [0, 1] for the programmatic reward: the share
// of the word's letters given in capitals (½ weight) plus ½ for ending in '!'
// (0 when the letters are not the prompt's word, case aside).
double synthetic_rule_score(const std::string& prompt, const std::string& response);

}  // namespace loom::align
