// Text cleaning, one pass plus NFC: invalid UTF-8 -> U+FFFD (counted); control
// characters removed (C0 but \t \n, DEL, C1); CR/CRLF and U+2028/2029 -> \n;
// Unicode spaces -> ' ', runs of spaces collapsed, lines right-trimmed, blank
// line runs capped, the text trimmed; zero-width/BOM/soft hyphen removed; then
// Unicode NFC through ICU (only when the text has non-ASCII characters).
// A cleaner keeps scratch buffers between calls: one per thread.
#pragma once

#include <cstdint>
#include <string>

namespace loom::ingest {

struct clean_options {
  bool nfc = true;
  bool keep_indentation = false;  // true (code): leading spaces and tabs stay as written
  int max_blank_lines = 1;        // consecutive empty lines kept (more are dropped)
  bool remove_invisible = true;   // U+200B, U+2060, U+FEFF, U+00AD
  // Replacements per input byte above which the pipeline rejects the document
  // (rule "invalid_utf8"): mostly-undecodable text is another encoding or junk.
  double max_replacement_ratio = 0.01;
};

struct clean_stats {
  std::uint64_t utf8_replacements = 0;
  std::uint64_t controls_removed = 0;  // control and invisible characters dropped
  std::uint64_t nfc_changed = 0;       // texts that NFC changed (0 or 1 per call)

  clean_stats& operator+=(const clean_stats& o) {
    utf8_replacements += o.utf8_replacements;
    controls_removed += o.controls_removed;
    nfc_changed += o.nfc_changed;
    return *this;
  }
};

class cleaner {
 public:
  explicit cleaner(clean_options opt = {});
  // Cleans `text` in place; returns what it changed.
  clean_stats clean(std::string& text);
  const clean_options& options() const { return opt_; }

 private:
  clean_options opt_;
  const void* nfc_ = nullptr;  // ICU's NFC Normalizer2 singleton (not owned; ICU kept out of this header)
  std::string out_, tmp_;
};

}  // namespace loom::ingest
