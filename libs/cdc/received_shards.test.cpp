// check_received_shards: a pulled dataset's manifest.json against the files
// that came with it (issue 24 item 16).
#include "libs/cdc/received_shards.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/shards/testing.hpp"
#include "libs/shards/writer.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace loom;
using namespace loom::cdc;
namespace fs = std::filesystem;

namespace {

// A dataset of a few small shards in `dir`; its manifest.
shards::manifest make_shards(const std::string& dir) {
  shards::writer_options o;
  o.dir = dir;
  o.target_bytes = 8192;
  auto w = shards::shard_writer::create(o);
  REQUIRE(w.ok());
  for (const auto& d : shards::testing::make_docs(600, 60, 50000, 7)) REQUIRE(w->append(d).ok());
  auto m = w->finish();
  REQUIRE(m.ok());
  REQUIRE(m->shards.size() >= 3);
  return *m;
}

staged_version staged(const std::string& dir) {
  staged_version v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) v.files[e.path().filename().string()] = e.path().string();
  return v;
}

std::string refusal(const staged_version& v) {
  auto st = check_received_shards(v, "notes");
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == errc::corruption);
  return st.err().message;
}

}  // namespace

TEST_CASE("a shard dataset whose manifest.json tells the truth is accepted") {
  files::temp_dir d{"loom-received"};
  make_shards(d.path());
  auto st = check_received_shards(staged(d.path()), "notes");
  CHECK_MESSAGE(st.ok(), st.err().to_string());
}

TEST_CASE("a manifest.json with zeroed hashes and tokens ×10 is refused naming each file and field") {
  files::temp_dir d{"loom-received"};
  auto m = make_shards(d.path());
  const auto real_tokens = m.shards[0].tokens;
  for (auto& s : m.shards) {
    s.sha256 = std::string(64, '0');
    s.tokens *= 10;
  }
  REQUIRE(shards::write_manifest(d.path(), m).ok());
  const std::string why = refusal(staged(d.path()));
  CHECK(why.find("dataset notes: manifest.json does not match the files received") != std::string::npos);
  CHECK(why.find("shard-000001.bin: sha256: manifest.json says " + std::string(64, '0')) != std::string::npos);
  CHECK(why.find("shard-000001.bin: tokens: manifest.json says " + std::to_string(real_tokens * 10) +
                 ", the shard's header says " + std::to_string(real_tokens)) != std::string::npos);
  CHECK(why.find("shard-000002.bin: sha256") != std::string::npos);
}

TEST_CASE("a manifest.json that lists a shard twice, a document count or a size that is not the file's is refused") {
  files::temp_dir d{"loom-received"};
  auto m = make_shards(d.path());
  auto twice = m;
  twice.shards.push_back(twice.shards[0]);  // every entry true, the totals doubled for that shard
  REQUIRE(shards::write_manifest(d.path(), twice).ok());
  CHECK(refusal(staged(d.path())).find("shard-000001.bin: is listed twice in manifest.json") != std::string::npos);

  auto docs = m;
  docs.shards[1].docs += 1;
  REQUIRE(shards::write_manifest(d.path(), docs).ok());
  CHECK(refusal(staged(d.path())).find("shard-000002.bin: docs: manifest.json says") != std::string::npos);

  auto bytes = m;
  bytes.shards[2].bytes += 2;
  REQUIRE(shards::write_manifest(d.path(), bytes).ok());
  CHECK(refusal(staged(d.path())).find("shard-000003.bin: bytes: manifest.json says") != std::string::npos);
}

TEST_CASE("a listed shard that did not come, a shard manifest.json does not list, or no manifest.json is refused") {
  files::temp_dir d{"loom-received"};
  auto m = make_shards(d.path());
  auto v = staged(d.path());
  auto without = v;
  without.files.erase("shard-000002.bin");
  CHECK(refusal(without).find("shard-000002.bin: is listed in manifest.json but did not come with it") !=
        std::string::npos);

  auto fewer = m;
  fewer.shards.pop_back();  // the last shard's tokens would go unrecorded
  REQUIRE(shards::write_manifest(d.path(), fewer).ok());
  CHECK(refusal(v).find(m.shards.back().name + ": came with the dataset but manifest.json does not list it") !=
        std::string::npos);

  v.files.erase("manifest.json");
  CHECK(refusal(v).find("no manifest.json came with it") != std::string::npos);
}

TEST_CASE("a shard's bytes that are not a shard are refused by name, never by the temp file's path") {
  files::temp_dir d{"loom-received"};
  auto m = make_shards(d.path());
  // The file as staged: a temp under another name, holding junk of the listed size and hash.
  const std::string junk(m.shards[0].bytes, 'x');
  const std::string tmp = d.path() + "/tmp-17";
  REQUIRE(files::write_atomic(tmp, junk).ok());
  m.shards[0].sha256 = crypto::sha256_hex(junk);
  REQUIRE(shards::write_manifest(d.path(), m).ok());
  auto v = staged(d.path());
  v.files.erase("tmp-17");
  v.files["shard-000001.bin"] = tmp;
  const std::string why = refusal(v);
  CHECK(why.find("shard-000001.bin: is not a valid shard file") != std::string::npos);
  CHECK(why.find("tmp-17") == std::string::npos);
}

TEST_CASE("media tars are checked by their bytes and hash: a changed, missing or unlisted tar is refused by name") {
  files::temp_dir d{"loom-received"};
  auto m = make_shards(d.path());
  const std::string tar(3072, 't');
  REQUIRE(files::write_atomic(d.path() + "/media-000001.tar", tar).ok());
  m.media.push_back({"media-000001.tar", crypto::sha256_hex(tar), tar.size(), 4, "image", ""});
  REQUIRE(shards::write_manifest(d.path(), m).ok());
  auto st = check_received_shards(staged(d.path()), "notes");
  CHECK_MESSAGE(st.ok(), st.err().to_string());

  std::string changed = tar;
  changed[100] = 'x';
  REQUIRE(files::write_atomic(d.path() + "/media-000001.tar", changed).ok());
  CHECK(refusal(staged(d.path())).find("media-000001.tar") != std::string::npos);

  fs::remove(d.path() + "/media-000001.tar");
  CHECK(refusal(staged(d.path())).find("media-000001.tar: is listed in manifest.json but did not come with it") !=
        std::string::npos);

  REQUIRE(files::write_atomic(d.path() + "/media-000001.tar", tar).ok());
  REQUIRE(files::write_atomic(d.path() + "/media-000002.tar", tar).ok());
  CHECK(refusal(staged(d.path())).find("media-000002.tar: came with the dataset but manifest.json does not list it") !=
        std::string::npos);
}

TEST_CASE("a node's share may leave out the shards it did not want, but not one it wanted") {
  files::temp_dir d{"loom-received"};
  auto m = make_shards(d.path());
  staged_version v = staged(d.path());
  const std::string other = m.shards[1].name;
  v.files.erase(other);
  v.not_wanted.insert(other);  // placed on another node: absent by design
  auto st = check_received_shards(v, "notes");
  CHECK_MESSAGE(st.ok(), st.err().to_string());
  v.not_wanted.clear();  // wanted but missing: refused by name
  CHECK(refusal(v).find(other + ": is listed in manifest.json but did not come with it") != std::string::npos);
}
