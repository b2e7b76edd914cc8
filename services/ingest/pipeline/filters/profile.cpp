#include "services/ingest/pipeline/filters/profile.hpp"

namespace loom::ingest {

std::vector<std::string> profile_names() { return {"default", "web", "code", "minimal"}; }

result<profile> profile_by_name(std::string_view name) {
  profile p;
  p.name = std::string(name);
  if (name == "default") return p;
  if (name == "web") {
    auto& q = p.quality;
    q.c4_curly_bracket = true;
    q.c4_drop_javascript_lines = true;
    q.c4_drop_policy_lines = true;
    q.c4_drop_unpunctuated_lines = true;
    q.c4_min_words_per_line = 3;  // datatrove's C4 default (the paper's text says 5 for its own crawl)
    q.c4_min_sentences = 3;       // C4 paper: pages with fewer than 3 sentences are dropped
    return p;
  }
  if (name == "code") {
    p.clean.keep_indentation = true;
    p.clean.max_blank_lines = 2;
    p.quality.gopher = false;
    p.quality.repetition = false;
    p.quality.min_chars = 1;
    return p;
  }
  if (name == "minimal") {
    p.quality.gopher = false;
    p.quality.repetition = false;
    p.quality.c4_lorem_ipsum = false;
    return p;
  }
  std::string known;
  for (const auto& n : profile_names()) known += (known.empty() ? "" : ", ") + n;
  return make_error(errc::invalid_argument, "unknown profile \"" + std::string(name) + "\" (known: " + known + ")");
}

}  // namespace loom::ingest
