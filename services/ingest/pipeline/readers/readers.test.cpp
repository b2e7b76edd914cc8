#include "services/ingest/pipeline/readers/reader.hpp"
#include "services/ingest/pipeline/test_support.hpp"

#include <doctest/doctest.h>

using namespace loom::ingest;
using namespace loom::ingest::testing;
using loom::files::temp_dir;

TEST_CASE("a plain text file is one document with its source, record and first line") {
  temp_dir t("loom-ingest");
  write_file(t.path() + "/a.txt", "Hello world.\nSecond line.\n");
  auto c = collect(t.path() + "/a.txt");
  REQUIRE(c.docs.size() == 1);
  CHECK(c.rejects.empty());
  CHECK(c.docs[0].source == t.path() + "/a.txt");
  CHECK(c.docs[0].text == "Hello world.\nSecond line.\n");
  CHECK(c.docs[0].kind == doc_kind::text);
  CHECK(c.docs[0].record == 0);
  CHECK(c.docs[0].line == 1);
  CHECK(c.stats.files == 1);
  CHECK(c.stats.bytes_decoded == 26);
}

TEST_CASE("text splits into paragraphs or lines on request, and at the document size limit") {
  temp_dir t("loom-ingest");
  write_file(t.path() + "/p.txt", "one a\none b\n\n\ntwo\n\nthree\n");
  reader_options o;
  o.split = text_split::paragraph;
  auto c = collect(t.path() + "/p.txt", o);
  REQUIRE(c.docs.size() == 3);
  CHECK(c.docs[0].text == "one a\none b\n");
  CHECK(c.docs[1].line == 5);
  CHECK(c.docs[2].record == 2);
  CHECK(c.docs[2].line == 7);

  o.split = text_split::line;
  c = collect(t.path() + "/p.txt", o);
  REQUIRE(c.docs.size() == 4);
  CHECK(c.docs[1].text == "one b\n");
  CHECK(c.docs[1].line == 2);

  std::string big;
  for (int i = 0; i < 100; ++i) big += "line " + std::to_string(i) + " of a text longer than one document\n";
  write_file(t.path() + "/big.txt", big);
  o = {};
  o.max_document_bytes = 1000;
  c = collect(t.path() + "/big.txt", o);
  REQUIRE(c.docs.size() > 3);
  std::string joined;
  for (const auto& d : c.docs) {
    CHECK(d.text.size() <= 1000);
    joined += d.text;
  }
  CHECK(joined == big);  // split at line boundaries, nothing lost
}

TEST_CASE("markdown is read as text without its markup") {
  temp_dir t("loom-ingest");
  write_file(t.path() + "/r.md",
             "---\ntitle: x\n---\n# Title #\n\nSome **bold** and _it_ text with `code` and a [link](http://x.org).\n"
             "![alt text](img.png)\n\n- item one\n* item two\n\n```cpp\nint a = b * c;\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
             "\n[ref]: http://example.org\n<!-- hidden -->\n> quoted snake_case_name\n");
  auto c = collect(t.path() + "/r.md");
  REQUIRE(c.docs.size() == 1);
  CHECK(c.docs[0].text ==
        "Title\n\nSome bold and it text with code and a link.\nalt text\n\n- item one\n- item two\n\nint a = b * c;\n\n"
        "a\tb\n1\t2\n\nquoted snake_case_name\n");
}

TEST_CASE("html is read as text: scripts and styles dropped, entities decoded, blocks on their own lines") {
  temp_dir t("loom-ingest");
  write_file(t.path() + "/p.html",
             "<!DOCTYPE html><html><head><title>T &amp; C</title><style>p{color:red}</style>"
             "<script>var s = '</p>'; if (a<b) {}</script></head>\n<body><!-- c --><p>Caf&eacute; &#233;&#xE9; "
             "&lt;tag&gt; &bogus; a &lt b</p><div>line<br>break</div><ul><li>one</li><li>two</li></ul>"
             "<table><tr><td>x</td><td>y</td></tr></table><pre>  keep\n   spaces</pre>"
             "<p>a <b>bold</b> word</p></body></html>");
  auto c = collect(t.path() + "/p.html");
  REQUIRE(c.docs.size() == 1);
  CHECK(c.docs[0].text ==
        "T & C\n\nCaf\u00e9 \u00e9\u00e9 <tag> &bogus; a &lt b\n\nline\nbreak\n\none\ntwo\n\nx\ty\n\n  keep\n   spaces\n\n"
        "a bold word\n\n");
  CHECK(c.docs[0].line == 0);
}

TEST_CASE("jsonl records are text, SFT chat or preference pairs, each with its line") {
  temp_dir t("loom-ingest");
  write_file(t.path() + "/d.jsonl",
             "{\"text\": \"plain one\", \"id\": 7}\n\n"
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi?\"}, {\"role\": \"assistant\", \"content\": \"Hello.\"}]}\n"
             "{\"prompt\": \"Q\", \"chosen\": \"good\", \"rejected\": \"bad\"}\n"
             "{\"body\": \"x\"}\n");
  reader_options o;
  auto c = collect(t.path() + "/d.jsonl", o);
  REQUIRE(c.docs.size() == 3);
  CHECK(c.docs[0].kind == doc_kind::text);
  CHECK(c.docs[0].text == "plain one");
  CHECK(c.docs[0].line == 1);
  CHECK(c.docs[1].kind == doc_kind::sft);
  REQUIRE(c.docs[1].messages.size() == 2);
  CHECK(c.docs[1].messages[1].role == "assistant");
  CHECK(c.docs[1].messages[1].content == "Hello.");
  CHECK(c.docs[1].line == 3);
  CHECK(c.docs[1].record == 1);
  CHECK(c.docs[2].kind == doc_kind::preference);
  CHECK(c.docs[2].chosen == "good");
  REQUIRE(c.rejects.size() == 1);
  CHECK(c.rejects[0].reason == reject_reason::json_missing_field);
  CHECK(c.rejects[0].line == 5);

  o.jsonl_text_field = "body";
  c = collect(t.path() + "/d.jsonl", o);
  CHECK(c.docs_from("d.jsonl").size() == 3);
  REQUIRE(c.reject_for("d.jsonl", 1) != nullptr);
  CHECK(c.reject_for("d.jsonl", 5) == nullptr);
}

TEST_CASE("csv follows RFC 4180 quoting and tsv splits on tabs") {
  temp_dir t("loom-ingest");
  write_file(t.path() + "/a.csv",
             "id,text,lang\r\n1,plain,en\r\n2,\"with, comma and \"\"quotes\"\"\",en\r\n3,\"two\r\nlines\",en\r\n4\r\n"
             "\r\n5,last,en");
  auto c = collect(t.path() + "/a.csv");
  REQUIRE(c.docs.size() == 4);
  CHECK(c.docs[0].text == "plain");
  CHECK(c.docs[0].line == 2);
  CHECK(c.docs[1].text == "with, comma and \"quotes\"");
  CHECK(c.docs[2].text == "two\r\nlines");
  CHECK(c.docs[2].line == 4);
  CHECK(c.docs[3].text == "last");
  CHECK(c.docs[3].line == 8);
  REQUIRE(c.rejects.size() == 1);
  CHECK(c.rejects[0].reason == reject_reason::csv_missing_column);
  CHECK(c.rejects[0].line == 6);

  write_file(t.path() + "/b.tsv", "text\tn\nfirst\t1\nsecond row\t2\n");
  c = collect(t.path() + "/b.tsv");
  REQUIRE(c.docs.size() == 2);
  CHECK(c.docs[1].text == "second row");

  reader_options o;
  o.csv_header = false;
  o.csv_column_index = 1;
  write_file(t.path() + "/c.csv", "x,first\ny,second\n");
  c = collect(t.path() + "/c.csv", o);
  REQUIRE(c.docs.size() == 2);
  CHECK(c.docs[0].text == "first");

  write_file(t.path() + "/d.csv", "a,b\n1,2\n");
  c = collect(t.path() + "/d.csv");
  CHECK(c.docs.empty());
  REQUIRE(c.reject_for("d.csv", 1) != nullptr);
  CHECK(c.reject_for("d.csv", 1)->reason == reject_reason::csv_missing_column);
}

TEST_CASE("gzip and zstd files are decompressed while streaming, and NAME.gz is plain text") {
  temp_dir t("loom-ingest");
  const std::string jsonl = "{\"text\": \"alpha\"}\n{\"text\": \"beta\"}\n";
  write_file(t.path() + "/a.jsonl.gz", gzip(jsonl));
  write_file(t.path() + "/b.md.zst", zstd("# Head\n\nbody *text*\n"));
  write_file(t.path() + "/notes.gz", gzip("just text\n"));
  write_file(t.path() + "/two.txt.gz", gzip("member one\n") + gzip("member two\n"));     // multi-member gzip
  write_file(t.path() + "/frames.txt.zst", zstd("frame one\n") + zstd("frame two\n"));  // two zstd frames
  write_file(t.path() + "/sneaky", gzip("gzip under a plain name\n"));                  // found by magic bytes
  auto c = collect(t.path());
  CHECK(c.rejects.empty());
  REQUIRE(c.docs_from("a.jsonl.gz").size() == 2);
  CHECK(c.docs_from("a.jsonl.gz")[1]->text == "beta");
  REQUIRE(c.docs_from("b.md.zst").size() == 1);
  CHECK(c.docs_from("b.md.zst")[0]->text == "Head\n\nbody text\n");
  REQUIRE(c.docs_from("notes.gz").size() == 1);
  CHECK(c.docs_from("notes.gz")[0]->text == "just text\n");
  REQUIRE(c.docs_from("two.txt.gz").size() == 1);
  CHECK(c.docs_from("two.txt.gz")[0]->text == "member one\nmember two\n");
  REQUIRE(c.docs_from("frames.txt.zst").size() == 1);
  CHECK(c.docs_from("frames.txt.zst")[0]->text == "frame one\nframe two\n");
  REQUIRE(c.docs_from("sneaky").size() == 1);
  CHECK(c.docs_from("sneaky")[0]->text == "gzip under a plain name\n");
}

TEST_CASE("directories are read recursively in byte order of names, skipping hidden entries") {
  temp_dir t("loom-ingest");
  write_file(t.path() + "/b/z.txt", "bz");
  write_file(t.path() + "/b/a.txt", "ba");
  write_file(t.path() + "/a.txt", "a");
  write_file(t.path() + "/B.txt", "B");
  write_file(t.path() + "/_x.txt", "_x");
  write_file(t.path() + "/.hidden.txt", "hidden");
  write_file(t.path() + "/.git/config", "hidden");
  std::vector<std::string> order;
  for (int run = 0; run < 2; ++run) {
    auto c = collect(t.path());
    std::vector<std::string> got;
    for (const auto& d : c.docs) got.push_back(d.text);
    CHECK(got == std::vector<std::string>{"B\n", "_x\n", "a\n", "ba\n", "bz\n"});
    if (run == 1) CHECK(got == order);
    order = got;
  }
}

TEST_CASE("tar archives are read member by member, compressed or nested") {
  temp_dir t("loom-ingest");
  std::vector<std::pair<std::string, std::string>> inner = {{"deep.txt", "deep text"}};
  write_tar(t.path() + "/tmp/inner.tar", inner);
  std::vector<std::pair<std::string, std::string>> members = {
      {"docs/a.txt", "member a"},
      {"docs/b.jsonl.gz", gzip("{\"text\": \"from gz in tar\"}\n")},
      {"inner.tar", read_all(t.path() + "/tmp/inner.tar")},
      {"pic.png", "\x89PNG"},
  };
  write_tar(t.path() + "/in/plain.tar", members);
  write_tar(t.path() + "/in/comp.tar.gz", members, "gzip");
  write_tar(t.path() + "/in/comp.tar.zst", members, "zstd");
  auto c = collect(t.path() + "/in");
  for (std::string name : {"comp.tar.gz", "comp.tar.zst", "plain.tar"}) {
    INFO(name);
    REQUIRE(c.docs_from(name + "!docs/a.txt").size() == 1);
    CHECK(c.docs_from(name + "!docs/a.txt")[0]->text == "member a\n");
    REQUIRE(c.docs_from(name + "!docs/b.jsonl.gz").size() == 1);
    CHECK(c.docs_from(name + "!docs/b.jsonl.gz")[0]->text == "from gz in tar");
    REQUIRE(c.docs_from(name + "!inner.tar!deep.txt").size() == 1);
    REQUIRE(c.reject_for(name + "!pic.png") != nullptr);
    CHECK(c.reject_for(name + "!pic.png")->reason == reject_reason::unknown_format);
  }
  CHECK(c.docs.size() == 9);

  reader_options o;
  o.max_archive_depth = 1;
  c = collect(t.path() + "/in/plain.tar", o);
  REQUIRE(c.reject_for("plain.tar!inner.tar") != nullptr);
  CHECK(c.reject_for("plain.tar!inner.tar")->reason == reject_reason::archive_too_deep);
}

TEST_CASE("a consumer returning false stops the import") {
  temp_dir t("loom-ingest");
  for (int i = 0; i < 5; ++i) write_file(t.path() + "/" + std::to_string(i) + ".txt", "doc");
  int seen = 0;
  read_callbacks cb;
  cb.on_document = [&](document&) { return ++seen < 2; };
  auto st = read_path(t.path(), {}, cb);
  CHECK(seen == 2);
  CHECK(st.documents == 2);
}

TEST_CASE("with roots, a symbolic link out of them is an outside_roots rejection naming it and nothing of it is read") {
  temp_dir t("loom-ingest");
  const std::string root = t.path() + "/in", out = t.path() + "/out";
  write_file(root + "/a.txt", "inside");
  write_file(root + "/sub/b.txt", "also inside");
  write_file(out + "/secret.txt", "the secret");
  std::filesystem::create_symlink(out + "/secret.txt", root + "/shadow.txt");
  std::filesystem::create_symlink("sub/b.txt", root + "/link-in.txt");
  std::filesystem::create_symlink("/etc/passwd", root + "/passwd.txt");
  reader_options o;
  o.roots = {root};
  auto c = collect(root, o);
  std::vector<std::string> got;
  for (const auto& d : c.docs) got.push_back(d.text);
  CHECK(got == std::vector<std::string>{"inside\n", "also inside\n", "also inside\n"});  // a.txt, link-in.txt, sub/b.txt
  for (const char* link : {"/shadow.txt", "/passwd.txt"}) {
    const rejection* r = c.reject_for(link);
    REQUIRE_MESSAGE(r, link);
    CHECK(r->reason == reject_reason::outside_roots);
    CHECK(r->file == root + link);
    CHECK(r->message.find("outside the allowed roots (" + root + ")") != std::string::npos);
  }
  CHECK(c.reject_for("/shadow.txt")->message.find(out + "/secret.txt") != std::string::npos);
  CHECK(to_string(reject_reason::outside_roots) == "outside_roots");

  // Without roots (the command-line tool) the link is followed as before.
  auto free = collect(root);
  CHECK(free.docs_from("/shadow.txt").size() == 1);
  // A path named outside the roots is refused whole.
  auto named = collect(out + "/secret.txt", o);
  CHECK(named.docs.empty());
  REQUIRE(named.rejects.size() == 1);
  CHECK(named.rejects[0].reason == reject_reason::outside_roots);
}
