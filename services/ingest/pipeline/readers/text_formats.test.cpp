#include "services/ingest/pipeline/readers/byte_source.hpp"
#include "services/ingest/pipeline/readers/entities.hpp"
#include "services/ingest/pipeline/readers/html_text.hpp"
#include "services/ingest/pipeline/readers/json_flat.hpp"
#include "services/ingest/pipeline/readers/line_reader.hpp"
#include "services/ingest/pipeline/readers/markdown_text.hpp"
#include "services/ingest/pipeline/readers/sniff.hpp"
#include "services/ingest/pipeline/utf8.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

using namespace loom::ingest;

namespace {
std::string md(std::string_view line) {
  std::string out;
  markdown_inline(line, out);
  return out;
}
std::string html(std::string_view in) {
  html_to_text h;
  std::string out;
  h.feed(in, out);
  h.finish(out);
  return out;
}
}  // namespace

TEST_CASE("markdown inline markup is stripped and literal symbols survive") {
  CHECK(md("**bold** and *it* and __b__ and ~~gone~~") == "bold and it and b and gone");
  CHECK(md("2 * 3 = 6, a_b_c, 5 _ 6") == "2 * 3 = 6, a_b_c, 5 _ 6");
  CHECK(md("see [the docs](http://x/y_(z)) or [ref][1] or [just brackets]") == "see the docs or ref or [just brackets]");
  CHECK(md("![a *pic*](p.png) <span class=\"x\">in</span> <https://e.org> a < b") == "a pic in https://e.org a < b");
  CHECK(md("``code with ` tick`` and \\*escaped\\* &amp; &copy;") == "code with ` tick and *escaped* & \u00a9");
}

TEST_CASE("html conversion gives the same text however the input is chunked") {
  const std::string page =
      "<p>Caf&eacute; <b>bold</b></p><script>x='</scr'+'ipt>'</script><SCRIPT type=x>y</script >"
      "<p title=\"a>b\">quoted &gt; attr</p><!-- a -- b --><style/>after self-closing style<br/>end &amp";
  const std::string whole = html(page);
  CHECK(whole == "Caf\u00e9 bold\n\nquoted > attr\n\nafter self-closing style\nend &amp");
  for (std::size_t step : {1, 2, 3, 7, 13}) {
    html_to_text h;
    std::string out;
    for (std::size_t i = 0; i < page.size(); i += step) h.feed(std::string_view(page).substr(i, step), out);
    h.finish(out);
    CHECK(out == whole);
  }
}

TEST_CASE("entities decode named, decimal and hex references and leave unknown ones") {
  std::string out;
  decode_entities("&lt;&Eacute;&omega;&Omega;&hellip;&#x1F600;&#0;&#xD800;&nope;&amp", out);
  CHECK(out == "<\u00c9\u03c9\u03a9\u2026\U0001F600\uFFFD\uFFFD&nope;&amp");
}

TEST_CASE("utf8 repair replaces each maximal ill-formed subpart with one U+FFFD") {
  std::string out;
  CHECK(utf8::repair("ok \xC3\xA9", out) == 0);
  CHECK(utf8::repair("\xC3(", out) == 1);
  CHECK(out == "\uFFFD(");
  CHECK(utf8::repair("a\xF0\x9F\x98", out) == 1);  // truncated 4-byte sequence: one subpart
  CHECK(out == "a\uFFFD");
  CHECK(utf8::repair("\xED\xA0\x80", out) == 3);   // a surrogate: three
  CHECK(utf8::repair("\xC0\xAF", out) == 2);       // overlong '/'
  CHECK(utf8::repair("\xF4\x90\x80\x80", out) == 4);  // past U+10FFFF
  CHECK(utf8::truncate("a\u00e9", 2) == "a");
}

TEST_CASE("the line reader streams past an over-long line holding at most the limit") {
  std::string data = "short\r\n" + std::string(5000, 'x') + "\nafter\nlast";
  auto src = make_memory_source(data);
  line_reader lr(*src, 1000);
  auto a = lr.next();
  CHECK(a.k == line_reader::kind::line);
  CHECK(a.text == "short");
  auto b = lr.next();
  CHECK(b.k == line_reader::kind::too_long);
  CHECK(b.number == 2);
  CHECK(b.length == 5000);
  auto c = lr.next();
  CHECK(c.text == "after");
  CHECK(c.number == 3);
  auto d = lr.next();
  CHECK(d.text == "last");
  CHECK(lr.next().k == line_reader::kind::end);
  CHECK(lr.peak_line_bytes() <= 1000);
}

TEST_CASE("names map to formats and compressions, and binary is told from text") {
  reader_options o;
  CHECK(format_for_name("a/b.JSONL.gz", o).format == source_format::jsonl);
  CHECK(format_for_name("a/b.jsonl.gz", o).comp == compression::gzip);
  CHECK(format_for_name("x.gz", o).format == source_format::text);
  CHECK(format_for_name("x.tar.zst", o).format == source_format::archive);
  CHECK(format_for_name("x.tar.zst", o).comp == compression::none);
  CHECK(format_for_name("x.tgz", o).format == source_format::archive);
  CHECK(format_for_name("README", o).format == source_format::text);
  CHECK(format_for_name("a.tar!dir/page.htm", o).format == source_format::html);
  CHECK(format_for_name("img.png", o).format == source_format::image);
  CHECK(format_for_name("a.tar!talk.FLAC", o).format == source_format::audio);
  CHECK(format_for_name("img.bmp", o).format == source_format::unknown);
  o.extensions = default_extensions();
  o.extensions["py"] = source_format::text;
  CHECK(format_for_name("x.py", o).format == source_format::text);

  CHECK_FALSE(binary_reason("plain text\twith\ttabs\r\n\x1b[0m and \xC3\xA9", 0.05).has_value());
  CHECK(binary_reason(std::string("ab\0cd", 5), 0.05).value() == "NUL byte at offset 2");
  CHECK(binary_reason("\x01\x02\x03 mostly controls", 0.05).has_value());
}

TEST_CASE("the flat JSON fast path agrees with nlohmann or steps aside") {
  using loom::ingest::detail::flat_field;
  std::vector<flat_field> f;
  const char* flat_lines[] = {
      R"({"text": "a\"b\\c\/d\n\t\u00e9\ud83d\ude00", "n": -1.5e3, "ok": true, "no": false, "x": null})",
      R"(  { }  )",
      R"({"a":"1","a":"2"})",
      R"({"k": 0, "z": 12.25})",
  };
  for (const char* line : flat_lines) {
    INFO(line);
    REQUIRE(loom::ingest::detail::parse_flat_object(line, f));
    auto j = nlohmann::json::parse(line);
    CHECK(f.size() >= j.size());
    for (const auto& x : f)
      if (x.t == flat_field::type::string && x.key != "a") CHECK(j[std::string(x.key)].get<std::string>() == x.value);
  }
  REQUIRE(loom::ingest::detail::parse_flat_object(R"({"a":"1","a":"2"})", f));
  CHECK(f.back().value == "2");
  const char* other_lines[] = {
      R"({"messages": []})",       R"({"t": {"x": 1}})",    R"({"t": "\ud800"})", R"({"t": "raw	Tab"})",
      R"({"t\u0041": "esc key"})", R"({"t": 01})",          R"({"t": "x"} extra)", R"({"t": tru})",
      R"([1, 2])",                 R"({"t": "unterminated)", R"({"t": -})",          R"({"t": 1.})",
  };
  for (const char* line : other_lines) {
    INFO(line);
    CHECK_FALSE(loom::ingest::detail::parse_flat_object(line, f));
  }
}
