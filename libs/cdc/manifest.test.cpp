#include "libs/cdc/manifest.hpp"

#include "libs/cdc/test_data.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace loom;
using namespace loom::cdc;
using loom::cdc::test::pseudo_random;

namespace {

// A small tree: nested dirs, an empty file, two files with the same content.
void make_tree(const std::string& dir) {
  test::put(dir, "a.txt", pseudo_random(300000, 1));
  test::put(dir, "sub/b.bin", pseudo_random(1u << 20, 2));
  test::put(dir, "sub/deeper/c.bin", pseudo_random(1u << 20, 2));  // same bytes as b.bin
  test::put(dir, "empty", "");
  test::put(dir, std::string(sync_dir_name) + "/manifest.json", "not part of the dataset");
}

}  // namespace

TEST_CASE("a manifest lists every regular file sorted, with contiguous chunks, and skips the sync directory") {
  files::temp_dir dir("loom-cdc");
  make_tree(dir.path());
  std::filesystem::create_symlink(dir.path() + "/a.txt", dir.path() + "/link");
  auto m = build_manifest(dir.path());
  REQUIRE(m.ok());
  REQUIRE(m->files.size() == 4);
  CHECK(m->files[0].path == "a.txt");
  CHECK(m->files[1].path == "empty");
  CHECK(m->files[2].path == "sub/b.bin");
  CHECK(m->files[3].path == "sub/deeper/c.bin");
  CHECK(m->files[1].chunks.empty());
  CHECK(m->files[2].root == m->files[3].root);
  CHECK(m->total_bytes() == 300000 + 2 * (1u << 20));
  for (const auto& f : m->files) {
    std::uint64_t off = 0;
    for (const auto& c : f.chunks) {
      CHECK(c.offset == off);
      off += c.length;
    }
    CHECK(off == f.size);
    CHECK(f.root == file_root(f.chunks));
  }
  CHECK(m->root == dataset_root(m->files));
  CHECK(build_manifest(dir.path() + "/nope").code() == errc::not_found);
}

TEST_CASE("the JSON form is byte-stable and round-trips, and tampering is caught by the roots") {
  files::temp_dir dir("loom-cdc");
  make_tree(dir.path());
  auto m1 = build_manifest(dir.path());
  auto m2 = build_manifest(dir.path());
  REQUIRE(m1.ok());
  REQUIRE(m2.ok());
  const std::string text = to_json(*m1);
  CHECK(text == to_json(*m2));
  CHECK(text.find("stamp") == std::string::npos);
  auto back = parse_manifest(text, "t");
  REQUIRE(back.ok());
  CHECK(to_json(*back) == text);
  CHECK(back->root == m1->root);

  auto summary = parse_manifest(to_json(*m1, json_form::summary), "t");
  REQUIRE(summary.ok());
  CHECK(summary->root == m1->root);
  CHECK(summary->files[2].chunks.empty());
  CHECK(summary->files[2].chunk_count == m1->files[2].chunk_count);

  // Change one hex digit of a chunk hash: its file root no longer matches.
  std::string bad = text;
  auto pos = bad.find("\"chunks\":[[0,");
  REQUIRE(pos != std::string::npos);
  pos = bad.find('"', pos + 14);
  bad[pos + 1] = bad[pos + 1] == '0' ? '1' : '0';
  CHECK(parse_manifest(bad, "t").code() == errc::corruption);
  // A path escaping the directory is refused even with consistent roots.
  manifest evil = *m1;
  evil.files[0].path = "../etc/passwd";
  evil.root = dataset_root(evil.files);
  CHECK(parse_manifest(to_json(evil), "t").code() == errc::corruption);
  CHECK(parse_manifest("{", "t").code() == errc::corruption);
}

TEST_CASE("one changed byte changes that file's root and the dataset root, nothing else") {
  files::temp_dir dir("loom-cdc");
  make_tree(dir.path());
  auto before = build_manifest(dir.path());
  REQUIRE(before.ok());
  test::patch(dir.path(), "sub/b.bin", 500000, "\x42");
  auto after = build_manifest(dir.path(), params{}, &*before);
  REQUIRE(after.ok());
  CHECK(after->root != before->root);
  auto d = diff_files(*before, *after);
  CHECK(d.changed == std::vector<std::string>{"sub/b.bin"});
  CHECK(d.removed.empty());
  chunk_set have;
  for (const auto& f : before->files)
    for (const auto& c : f.chunks) have.insert(c.sha256);
  auto missing = missing_chunks(*after, have);
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].offset <= 500000);
  CHECK(missing[0].offset + missing[0].length > 500000);
}

TEST_CASE("missing chunks are listed once each in manifest order, duplicates across files included once") {
  files::temp_dir dir("loom-cdc");
  make_tree(dir.path());
  auto m = build_manifest(dir.path());
  REQUIRE(m.ok());
  auto all = missing_chunks(*m, {});
  std::size_t distinct = m->files[0].chunks.size() + m->files[2].chunks.size();  // c.bin repeats b.bin
  CHECK(all.size() == distinct);
  CHECK(all.front().sha256 == m->files[0].chunks.front().sha256);
  chunk_set have;
  for (const auto& c : m->files[2].chunks) have.insert(c.sha256);
  CHECK(missing_chunks(*m, have).size() == m->files[0].chunks.size());
}

TEST_CASE("unchanged files are taken from the previous manifest by their stat stamp without reading them") {
  files::temp_dir dir("loom-cdc");
  make_tree(dir.path());
  // Stamps of files written within the last 2 s are not trusted; age them.
  for (const char* f : {"a.txt", "sub/b.bin", "sub/deeper/c.bin", "empty"})
    std::filesystem::last_write_time(dir.path() + "/" + f,
                                     std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
  auto first = build_manifest(dir.path());
  REQUIRE(first.ok());
  build_stats st;
  auto second = build_manifest(dir.path(), params{}, &*first, &st);
  REQUIRE(second.ok());
  CHECK(st.files_reused == 4);
  CHECK(st.files_read == 0);
  CHECK(second->root == first->root);

  // The cache form keeps the stamps across a save and a load.
  auto cached = parse_manifest(to_json(*first, json_form::cache), "cache");
  REQUIRE(cached.ok());
  CHECK(cached->files[0].stamp == first->files[0].stamp);
  test::put(dir.path(), "a.txt", pseudo_random(300000, 99));  // new content, fresh mtime
  build_stats st2;
  auto third = build_manifest(dir.path(), params{}, &*cached, &st2);
  REQUIRE(third.ok());
  CHECK(st2.files_read == 1);
  CHECK(st2.files_reused == 3);
  CHECK(third->root != first->root);
}

TEST_CASE("relative paths that escape, are empty or point into the sync directory are invalid") {
  CHECK(valid_relative_path("a/b.txt").ok());
  CHECK(valid_relative_path("x..y").ok());
  CHECK_FALSE(valid_relative_path("").ok());
  CHECK_FALSE(valid_relative_path("/etc/passwd").ok());
  CHECK_FALSE(valid_relative_path("a/../../b").ok());
  CHECK_FALSE(valid_relative_path("a//b").ok());
  CHECK_FALSE(valid_relative_path("a/./b").ok());
  CHECK_FALSE(valid_relative_path("a/").ok());
  CHECK_FALSE(valid_relative_path(".loom-sync/chunks/x").ok());
  CHECK(valid_relative_path("sub/.loom-sync").ok());
  CHECK_FALSE(valid_relative_path(std::string("a\0b", 3)).ok());
}
