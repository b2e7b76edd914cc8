#include "libs/cdc/chunk_store.hpp"

#include "libs/cdc/test_data.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>

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
