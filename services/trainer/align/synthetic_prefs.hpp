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

// The rule as a graded score in [0, 1] for the programmatic reward: ½ × the
// mean over the word's letters of (1 for the prompt's letter in capitals at
// that position, ½ for it in lower case, 0 otherwise), plus ½ when the answer
// is exactly that long plus a final '!'. Chosen answers score 1; rejected: a
// lower-case word 0.75, a '.' ending 0.5, another word less than 1.
double synthetic_rule_score(const std::string& prompt, const std::string& response);

// The rule's format half alone, a regex-like rule ^[A-Z]+!$ with a length
// bound, graded in [0, 1]: 0 when the answer is empty or longer than 8
// characters; else ½ × the share of capitals before its last character plus
// ½ when it ends in '!'. It needs no copying of the prompt's word, which a
// model this small does for the words it was trained on but not for unseen
// ones: the GRPO reward on held-out prompts.
double synthetic_format_score(const std::string& response);

}  // namespace loom::align
