// printable() and json_text(): what came from outside cannot drive the
// terminal or break a JSON line.
#include "client/output.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using loom::cli::printable;

TEST_CASE("control characters are escaped and plain text is left alone") {
  CHECK(printable("alice/viewer") == "alice/viewer");
  CHECK(printable("a\nb\rc\td") == "a\\nb\\rc\\td");
  CHECK(printable("\x1b[2J") == "\\x1b[2J");
  CHECK(printable(std::string("nul\0!", 5)) == "nul\\x00!");
  CHECK(printable("del\x7f") == "del\\x7f");
  CHECK(printable("back\\slash") == "back\\\\slash");  // an escape in the input cannot pass for ours
  // Our own messages quote outside text already escaped: a backslash passes, controls do not.
  CHECK(loom::cli::printable_message("name 'a\\x0ab'\n") == "name 'a\\x0ab'\\n");
}

TEST_CASE("C1 controls, bidi overrides and invalid UTF-8 are escaped byte by byte") {
  CHECK(printable("caf\xc3\xa9 \xe6\x97\xa5") == "caf\xc3\xa9 \xe6\x97\xa5");  // valid UTF-8 stays
  CHECK(printable("\xc2\x9b" "2J") == "\\xc2\\x9b2J");                   // U+009B, the 8-bit CSI
  CHECK(printable("\x9b" "2J") == "\\x9b2J");                            // a raw CSI byte
  CHECK(printable("\xe2\x80\xae" "txt") == "\\xe2\\x80\\xaetxt");        // U+202E right-to-left override
  CHECK(printable("\xe2\x80\xa8") == "\\xe2\\x80\\xa8");                 // U+2028 line separator
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                          // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");                 // a surrogate
  CHECK(printable("\xf0\x9f\x98") == "\\xf0\\x9f\\x98");                 // cut short
}

TEST_CASE("a multi-line message prints whole, each line indented and escaped") {
  CHECK(loom::cli::indented_lines("stage sft failed:\ntrainer said \x1b[31mno\n", "  ") ==
        "  stage sft failed:\n  trainer said \\x1b[31mno\n");
  CHECK(loom::cli::indented_lines("", "  ").empty());
  CHECK(loom::cli::indented_lines("a\n\nb", "> ") == "> a\n> \n> b\n");
}

TEST_CASE("a JSON line with invalid UTF-8 stays valid JSON") {
  nlohmann::json j{{"principal", "bad\xff\xfe" "name\n"}};
  std::string line;
  CHECK_NOTHROW(line = loom::cli::json_text(j));
  CHECK(line.find('\n') == std::string::npos);
  auto back = nlohmann::json::parse(line, nullptr, false);
  REQUIRE_FALSE(back.is_discarded());
  CHECK(back["principal"] == "bad\xef\xbf\xbd\xef\xbf\xbdname\n");
}
