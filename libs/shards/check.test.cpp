#include "libs/files/files.hpp"
#include "libs/shards/check.hpp"
#include "libs/shards/placement.hpp"
#include "libs/shards/testing.hpp"
#include "libs/shards/writer.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>

using namespace loom;
using namespace loom::shards;
using loom::shards::testing::make_docs;
using loom::shards::testing::temp_dir;

namespace {

// Three shards of uint16 documents in `dir`, and their manifest.
manifest three_shards(const std::string& dir) {
  writer_options o;
  o.dir = dir;
  o.target_bytes = 4096;
  auto w = shard_writer::create(o);
  REQUIRE(w.ok());
  for (const auto& d : make_docs(120, 120, 50000, 7)) REQUIRE(w->append(d).ok());
  auto m = w->finish();
  REQUIRE(m.ok());
  REQUIRE(m->shards.size() >= 3);
  return *m;
}

std::vector<shard_problem> check(const std::string& dir, const manifest& m, check_depth d) {
  auto r = check_shards(dir, m.shards, d);
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("intact shards pass both the cheap and the full check") {
  temp_dir t;
  auto m = three_shards(t.path());
  CHECK(check(t.path(), m, check_depth::cheap).empty());
  CHECK(check(t.path(), m, check_depth::full).empty());
  CHECK(check_dataset_dir(t.path()).empty());
}

TEST_CASE("a deleted shard and a truncated one are named by the cheap check") {
  temp_dir t;
  auto m = three_shards(t.path());
  std::filesystem::remove(t.path() + "/" + m.shards[1].name);
  std::filesystem::resize_file(t.path() + "/" + m.shards[2].name, 10);
  auto p = check(t.path(), m, check_depth::cheap);
  REQUIRE(p.size() == 2);
  CHECK(p[0].shard == m.shards[1].name);
  CHECK(p[0].what == "is missing");
  CHECK(p[1].shard == m.shards[2].name);
  CHECK(p[1].what == "has 10 bytes, the manifest says " + std::to_string(m.shards[2].bytes));
  CHECK(describe(p) == m.shards[1].name + " is missing; " + m.shards[2].name + " has 10 bytes, the manifest says " +
                           std::to_string(m.shards[2].bytes));
  CHECK(describe(p, 1) == m.shards[1].name + " is missing; and 1 more");
  auto d = check_dataset_dir(t.path());
  REQUIRE(d.size() == 2);
  CHECK(d[0].shard == m.shards[1].name);
}

TEST_CASE("a flipped byte passes the cheap check and is named by the full one with both hashes") {
  temp_dir t;
  auto m = three_shards(t.path());
  const std::string path = t.path() + "/" + m.shards[0].name;
  auto bytes = files::read_file(path);
  REQUIRE(bytes.ok());
  (*bytes)[bytes->size() - 1] ^= 0x01;
  REQUIRE(files::write_atomic(path, *bytes).ok());
  CHECK(check(t.path(), m, check_depth::cheap).empty());
  auto p = check(t.path(), m, check_depth::full);
  REQUIRE(p.size() == 1);
  CHECK(p[0].shard == m.shards[0].name);
  CHECK(p[0].what.starts_with("has SHA-256 "));
  CHECK(p[0].what.ends_with("the manifest says " + m.shards[0].sha256));
}

TEST_CASE("a shard replaced by a symbolic link is a problem even when the link leads to the right bytes") {
  temp_dir t, elsewhere;
  auto m = three_shards(t.path());
  const std::string shard = t.path() + "/" + m.shards[0].name;
  std::filesystem::rename(shard, elsewhere.path() + "/moved.bin");
  std::filesystem::create_symlink(elsewhere.path() + "/moved.bin", shard);
  auto p = check(t.path(), m, check_depth::cheap);
  REQUIRE(p.size() == 1);
  CHECK(p[0].what == "is a symbolic link, not a file of the dataset");
}

TEST_CASE("a dataset directory without a manifest is one problem naming manifest.json") {
  temp_dir t;
  auto d = check_dataset_dir(t.path());
  REQUIRE(d.size() == 1);
  CHECK(d[0].shard == "manifest.json");
  CHECK(d[0].what == "is missing");
}

TEST_CASE("the full check stops when asked") {
  temp_dir t;
  auto m = three_shards(t.path());
  std::atomic<bool> stop{true};
  CHECK(check_shards(t.path(), m.shards, check_depth::full, &stop).code() == errc::unavailable);
  CHECK(check_shards(t.path(), m.shards, check_depth::cheap, &stop).ok());  // the cheap one has nothing to stop
}

TEST_CASE("a manifest's media tars round-trip, are placed on their own, and the cheap dataset check names a missing one") {
  temp_dir t;
  manifest m = three_shards(t.path());
  for (int i = 1; i <= 4; ++i) {
    const std::string name = "media-00000" + std::to_string(i) + ".tar", bytes(1024 * i, 'm');
    REQUIRE(files::write_atomic(t.path() + "/" + name, bytes).ok());
    m.media.push_back({name, std::string(64, 'a'), bytes.size(), std::uint64_t(i), i == 4 ? "mixed" : "image", ""});
  }
  REQUIRE(place_manifest(m, std::vector<std::string>{"edge-a", "edge-b"}).ok());
  std::map<std::string, int> per_node;
  for (const auto& s : m.media) ++per_node[s.node];
  CHECK(per_node.size() == 2);  // balanced on their own: 4 tars on 2 nodes, at most ceil(1.05 * 2) each
  REQUIRE(write_manifest(t.path(), m).ok());
  auto back = read_manifest(t.path());
  REQUIRE(back.ok());
  REQUIRE(back->media.size() == 4);
  CHECK(back->media[3].kind == "mixed");
  CHECK(back->media[2].records == 3);
  CHECK(back->media[1].node == m.media[1].node);
  CHECK(check_dataset_dir(t.path()).empty());
  std::filesystem::remove(t.path() + "/media-000002.tar");
  const auto problems = check_dataset_dir(t.path());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].shard == "media-000002.tar");
  CHECK(problems[0].what == "is missing");
  // A kind the reader does not know is refused by name.
  std::string text = to_json(m);
  text.replace(text.find("\"mixed\""), 7, "\"video\"");
  auto bad = parse_manifest(text, "manifest.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().message.find("media-000004.tar: unknown media kind \"video\"") != std::string::npos);
}
