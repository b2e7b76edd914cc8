#include "libs/cdc/chunk_store.hpp"

#include "libs/atrest/kek_store.hpp"
#include "libs/cdc/test_data.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <memory>

using namespace loom;
using namespace loom::cdc;

namespace {

struct pack {
  std::vector<std::string> chunks;
  std::vector<crypto::digest> ids;
  std::vector<std::uint32_t> lengths;
  std::string bytes;
};

pack make_pack(std::initializer_list<std::size_t> sizes, std::uint64_t seed) {
  pack p;
  for (auto n : sizes) {
    p.chunks.push_back(test::pseudo_random(n, seed++));
    p.ids.push_back(crypto::sha256(p.chunks.back()));
    p.lengths.push_back(static_cast<std::uint32_t>(n));
    p.bytes += p.chunks.back();
  }
  return p;
}

}  // namespace

TEST_CASE("an adopted pack makes each of its chunks available by hash, also after a reload") {
  files::temp_dir dir("loom-cdc");
  const std::string root = dir.path() + "/chunks";
  pack p = make_pack({70000, 20000, 100000}, 1);
  test::put(dir.path(), "incoming", p.bytes);
  {
    chunk_store store(root);
    auto n = store.add_pack("pack-1", dir.path() + "/incoming", p.ids, p.lengths);
    REQUIRE(n.ok());
    CHECK(*n == 3);
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/incoming"));  // moved, not copied
    auto got = store.get(p.ids[1]);
    REQUIRE(got.ok());
    CHECK(*got == p.chunks[1]);
    REQUIRE(store.locate(p.ids[2]) != nullptr);
    CHECK(store.locate(p.ids[2])->offset == 90000);
  }
  chunk_store again(root);  // what a resumed pull sees
  CHECK(again.size() == 3);
  auto got = again.get(p.ids[2]);
  REQUIRE(got.ok());
  CHECK(*got == p.chunks[2]);
  CHECK(again.get(crypto::sha256("absent")).code() == errc::not_found);
  REQUIRE(again.clear().ok());
  CHECK(again.size() == 0);
  CHECK(std::filesystem::is_empty(root));
}

TEST_CASE("a damaged chunk in a pack is caught when read and dropped, and a pack of the wrong size is refused") {
  files::temp_dir dir("loom-cdc");
  chunk_store store(dir.path() + "/chunks");
  pack p = make_pack({30000, 40000}, 5);
  p.bytes[35000] ^= 0x01;  // inside the second chunk, as a faulty sender would
  test::put(dir.path(), "in", p.bytes);
  auto n = store.add_pack("pack-2", dir.path() + "/in", p.ids, p.lengths);
  REQUIRE(n.ok());
  CHECK(*n == 2);
  CHECK(store.get(p.ids[0]).ok());
  CHECK(store.get(p.ids[1]).code() == errc::corruption);
  CHECK_FALSE(store.contains(p.ids[1]));  // so the caller fetches it again

  // Damage the stored bytes of the first chunk afterwards (bit rot).
  test::patch("/", store.locate(p.ids[0])->pack.substr(1), 100, "ZZZZ");
  CHECK(store.get(p.ids[0]).code() == errc::corruption);
  CHECK_FALSE(store.contains(p.ids[0]));

  test::put(dir.path(), "short", p.bytes.substr(0, 50000));
  CHECK(store.add_pack("pack-3", dir.path() + "/short", p.ids, p.lengths).code() == errc::corruption);
  CHECK(store.size() == 0);
}

TEST_CASE("with at-rest keys a pack is stored with each chunk sealed, the plaintext pack gone, and read back verified") {
  files::temp_dir dir("loom-cdc");
  auto opened = atrest::kek_store::open(dir.path() + "/atrest", {}, std::chrono::system_clock::now());
  REQUIRE(opened.ok());
  std::shared_ptr<atrest::kek_store> keys(std::move(*opened));
  const std::string root = dir.path() + "/chunks";
  pack p = make_pack({70000, 20000, 100000}, 9);
  test::put(dir.path(), "incoming", p.bytes);
  {
    chunk_store store(root, keys);
    auto n = store.add_pack("pack-s", dir.path() + "/incoming", p.ids, p.lengths);
    REQUIRE_MESSAGE(n.ok(), (n.ok() ? std::string() : n.err().to_string()));
    CHECK(*n == 3);
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/incoming"));  // the plaintext pack is removed
    // No chunk's bytes lie in the store in the clear (a 64-byte window of each).
    auto stored = files::read_file(root + "/pack-s");
    REQUIRE(stored.ok());
    for (const auto& c : p.chunks) CHECK(stored->find(c.substr(1000, 64)) == std::string::npos);
    CHECK(store.locate(p.ids[1])->sealed);
    for (std::size_t i = 0; i < 3; ++i) {
      auto got = store.get(p.ids[i]);
      REQUIRE(got.ok());
      CHECK(*got == p.chunks[i]);
    }
  }
  // A resumed pull reads them; a store without keys cannot, and says why.
  chunk_store again(root, keys);
  CHECK(again.size() == 3);
  CHECK(again.get(p.ids[2]).value() == p.chunks[2]);
  chunk_store keyless(root);
  auto no_keys = keyless.get(p.ids[0]);
  CHECK(no_keys.code() == errc::corruption);
  CHECK_MESSAGE(no_keys.err().message.find("no keys") != std::string::npos, no_keys.err().message);
  // A sealed chunk changed on disk fails its tag, named, and only it is dropped.
  const auto* c = again.locate(p.ids[1]);
  REQUIRE(c != nullptr);
  test::patch("/", c->pack.substr(1), c->offset + c->length - 40, "ZZZZ");
  auto bad = again.get(p.ids[1]);
  CHECK(bad.code() == errc::corruption);
  CHECK_MESSAGE(bad.err().message.find("pack-s at ") != std::string::npos, bad.err().message);
  CHECK_FALSE(again.contains(p.ids[1]));
  CHECK(again.get(p.ids[0]).value() == p.chunks[0]);
}
