#include "services/ingest/pipeline/filters/clean.hpp"

#include <doctest/doctest.h>

using namespace loom::ingest;

namespace {
std::string cleaned(std::string s, clean_options o = {}, clean_stats* st = nullptr) {
  cleaner c(o);
  auto r = c.clean(s);
  if (st) *st = r;
  return s;
}
}  // namespace

TEST_CASE("NFC composes a decomposed e-acute and leaves composed text alone") {
  clean_stats st;
  CHECK(cleaned("Cafe\u0301 cre\u0300me", {}, &st) == "Caf\u00e9 cr\u00e8me");
  CHECK(st.nfc_changed == 1);
  CHECK(cleaned("Caf\u00e9", {}, &st) == "Caf\u00e9");
  CHECK(st.nfc_changed == 0);
  CHECK(cleaned("\u212B", {}, &st) == "\u00C5");  // ANGSTROM SIGN -> A WITH RING ABOVE
  clean_options off;
  off.nfc = false;
  CHECK(cleaned("Cafe\u0301", off) == "Cafe\u0301");
}

TEST_CASE("invalid UTF-8 is replaced by U+FFFD and counted") {
  clean_stats st;
  CHECK(cleaned("ok \xC3( and \xFF\xFE end \xE2\x82", {}, &st) == "ok \uFFFD( and \uFFFD\uFFFD end \uFFFD");
  CHECK(st.utf8_replacements == 4);
}

TEST_CASE("control characters go, tabs and newlines stay, spaces collapse and lines are trimmed") {
  clean_stats st;
  CHECK(cleaned("  a \x01  b\x7f  \r\n\r\n\r\n\n c\t d  \u0085\u00a0x\u2003y\u200bz\xEF\xBB\xBF ", {}, &st) ==
        "a b\n\nc\t d x yz");
  CHECK(st.controls_removed == 5);  // \x01, DEL, U+0085, U+200B, U+FEFF
  CHECK(cleaned("line one\rline two\u2028three") == "line one\nline two\nthree");
  CHECK(cleaned("\n\n  \n lead and trail \n\n") == "lead and trail");
  clean_options two;
  two.max_blank_lines = 2;
  CHECK(cleaned("a\n\n\n\n\nb", two) == "a\n\n\nb");
}

TEST_CASE("the code profile keeps indentation") {
  clean_options code;
  code.keep_indentation = true;
  CHECK(cleaned("int f() {\n    return  1;   \n\treturn 2;\n}\n", code) == "int f() {\n    return 1;\n\treturn 2;\n}");
  CHECK(cleaned("int f() {\n    return  1;\n}") == "int f() {\nreturn 1;\n}");
}
