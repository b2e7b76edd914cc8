#include "services/ingest/pipeline/filters/clean.hpp"

#include "services/ingest/pipeline/utf8.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

namespace loom::ingest {
namespace {

bool is_unicode_space(char32_t cp) {
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

bool is_invisible(char32_t cp) { return cp == 0x200B || cp == 0x2060 || cp == 0xFEFF || cp == 0xAD; }

const icu::Normalizer2* nfc(const void* p) { return static_cast<const icu::Normalizer2*>(p); }

}  // namespace

cleaner::cleaner(clean_options opt) : opt_(opt) {
  UErrorCode ec = U_ZERO_ERROR;
  nfc_ = icu::Normalizer2::getNFCInstance(ec);
  if (U_FAILURE(ec)) nfc_ = nullptr;  // no ICU data: NFC is skipped, the rest still runs
}

clean_stats cleaner::clean(std::string& text) {
  clean_stats st;
  out_.clear();
  out_.reserve(text.size());
  auto p = reinterpret_cast<const unsigned char*>(text.data());
  const auto end = p + text.size();

  bool pending_space = false;
  bool at_line_start = true;
  bool non_ascii = false;
  int newlines = 0;               // '\n' just written
  std::size_t content_end = 0;    // out_ size after the last visible character of this line
  const std::size_t max_newlines = static_cast<std::size_t>(std::max(0, opt_.max_blank_lines)) + 1;

  auto visible = [&](const unsigned char* b, std::size_t n) {
    if (pending_space) {
      if (!at_line_start) out_ += ' ';
      pending_space = false;
    }
    out_.append(reinterpret_cast<const char*>(b), n);
    at_line_start = false;
    newlines = 0;
    content_end = out_.size();
  };
  auto space = [&] {
    if (at_line_start && opt_.keep_indentation) out_ += ' ';
    else pending_space = true;
  };
  auto newline = [&] {
    out_.resize(content_end);  // right-trim the line
    pending_space = false;
    at_line_start = true;
    if (out_.empty()) return;  // no leading blank lines
    if (static_cast<std::size_t>(newlines) < max_newlines) {
      out_ += '\n';
      ++newlines;
    }
    content_end = out_.size();
  };

  while (p < end) {
    const unsigned char b = *p;
    if (b > 0x20 && b < 0x7F) {
      auto q = p + 1;
      while (q < end && *q > 0x20 && *q < 0x7F) ++q;
      visible(p, static_cast<std::size_t>(q - p));
      p = q;
      continue;
    }
    if (b == ' ') {
      space();
      ++p;
    } else if (b == '\n') {
      newline();
      ++p;
    } else if (b == '\r') {
      newline();
      ++p;
      if (p < end && *p == '\n') ++p;
    } else if (b == '\t') {
      pending_space = false;
      if (!at_line_start || opt_.keep_indentation) out_ += '\t';
      ++p;
    } else if (b < 0x80) {
      ++st.controls_removed;  // other C0 controls and DEL
      ++p;
    } else {
      auto d = utf8::decode(p, end);
      if (!d.valid) {
        ++st.utf8_replacements;
        non_ascii = true;
        visible(reinterpret_cast<const unsigned char*>(utf8::replacement.data()), utf8::replacement.size());
      } else if (d.cp <= 0x9F) {
        ++st.controls_removed;  // C1
      } else if (is_unicode_space(d.cp)) {
        space();
      } else if (d.cp == 0x2028 || d.cp == 0x2029) {
        newline();
      } else if (opt_.remove_invisible && is_invisible(d.cp)) {
        ++st.controls_removed;
      } else {
        non_ascii = true;
        visible(p, d.len);
      }
      p += d.len;
    }
  }
  out_.resize(content_end);
  while (!out_.empty() && out_.back() == '\n') out_.pop_back();

  // Documents are bounded far below 2 GiB; ICU's StringPiece length is int32.
  if (non_ascii && opt_.nfc && nfc_ && out_.size() < (1u << 31) - 1) {
    UErrorCode ec = U_ZERO_ERROR;
    icu::StringPiece sp(out_.data(), static_cast<int32_t>(out_.size()));
    if (!nfc(nfc_)->isNormalizedUTF8(sp, ec) && U_SUCCESS(ec)) {
      tmp_.clear();
      icu::StringByteSink<std::string> sink(&tmp_, static_cast<int32_t>(out_.size()));
      nfc(nfc_)->normalizeUTF8(0, sp, sink, nullptr, ec);
      if (U_SUCCESS(ec)) {
        out_.swap(tmp_);
        st.nfc_changed = 1;
      }
    }
  }
  text.swap(out_);
  return st;
}

}  // namespace loom::ingest
