// The codecs that keep packs in transit sealed: the puller's (data keys
// wrapped by the KEK, readable by the next process, bound to the piece's
// index) and the server's (a key that dies with the process), and a pack the
// server builds sealed holding the requested chunks and no plaintext.
#include "libs/cdc/piece_codecs.hpp"
#include "libs/cdc/served_dataset.hpp"
#include "libs/cdc/test_data.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <chrono>

using namespace loom;
using namespace loom::cdc;
using namespace loom::cdc::test;

namespace {

std::shared_ptr<atrest::kek_store> open_keys(const std::string& dir) {
  auto k = atrest::kek_store::open(dir, {}, std::chrono::system_clock::now());
  REQUIRE_MESSAGE(k.ok(), k.err().to_string());
  return std::move(*k);
}

}  // namespace

TEST_CASE("a piece sealed under the KEK opens in the next process, after a rotation, and only as its own index") {
  files::temp_dir dir("loom-pieces-keys");
  const std::string plain = pseudo_random(1u << 20, 5);
  std::string sealed, back;
  {
    kek_pieces codec(open_keys(dir.path() + "/atrest"));
    REQUIRE(codec.seal(plain, 7, sealed).ok());
    CHECK(sealed.size() == plain.size() + codec.overhead());
    CHECK(sealed.find(plain.substr(1000, 32)) == std::string::npos);
  }
  auto keys = open_keys(dir.path() + "/atrest");  // another process, the same deployment
  REQUIRE(keys->rotate(std::chrono::system_clock::now()).ok());
  kek_pieces codec(keys);
  REQUIRE(codec.open(sealed, 7, "incoming/pack", back).ok());
  CHECK(back == plain);
  auto moved = codec.open(sealed, 8, "incoming/pack", back);
  CHECK(moved.code() == errc::corruption);
  CHECK(moved.err().message.find("incoming/pack") != std::string::npos);
  CHECK(moved.err().message.find("moved or repeated") != std::string::npos);
  sealed[sealed.size() / 2] ^= 1;
  auto bad = codec.open(sealed, 7, "incoming/pack", back);
  CHECK(bad.code() == errc::corruption);
  CHECK(bad.err().message.find("incoming/pack piece 7") != std::string::npos);

  files::temp_dir other("loom-pieces-keys");  // another deployment's keys
  kek_pieces foreign(open_keys(other.path() + "/atrest"));
  std::string again;
  REQUIRE(codec.seal("abc", 0, again).ok());
  CHECK_FALSE(foreign.open(again, 0, "x", back).ok());
}

TEST_CASE("a piece sealed under a process key opens only under that key and only as its own index") {
  ephemeral_pieces a("loom.cdc.pack-scratch"), b("loom.cdc.pack-scratch");
  std::string sealed, back;
  REQUIRE(a.seal("the pack's bytes", 3, sealed).ok());
  CHECK(sealed.size() == 16 + a.overhead());
  REQUIRE(a.open(sealed, 3, "scratch", back).ok());
  CHECK(back == "the pack's bytes");
  CHECK(a.open(sealed, 4, "scratch", back).code() == errc::corruption);
  auto other = b.open(sealed, 3, "scratch", back);
  CHECK(other.code() == errc::corruption);
  CHECK(other.err().message.find("another process") != std::string::npos);
  CHECK(a.open(std::string_view(sealed).substr(1), 3, "scratch", back).code() == errc::corruption);
}

TEST_CASE("a pack built sealed holds the requested chunks in order and none of them in the clear") {
  files::temp_dir dir("loom-pack-build");
  const std::string data_dir = dir.path() + "/ds";
  put(data_dir, "a.bin", pseudo_random(600u << 10, 1));
  put(data_dir, "b.bin", pseudo_random(300u << 10, 2));
  dataset_cache cache(params{});
  auto snap = cache.refresh(data_dir, "ds");
  REQUIRE_MESSAGE(snap.ok(), snap.err().to_string());
  std::vector<crypto::digest> ids;
  std::string expected;
  for (const auto& f : (*snap)->m.files)
    for (const auto& c : f.chunks) {
      ids.push_back(c.sha256);
      expected += get(data_dir, f.path).substr(c.offset, c.length);
    }
  REQUIRE(ids.size() > 4);
  std::reverse(ids.begin(), ids.end());  // any order the puller asks for
  std::string want;
  for (const auto& id : ids) {
    const auto loc = (*snap)->index.at(id);
    const auto& c = (*snap)->m.files[loc.file].chunks[loc.chunk];
    want += get(data_dir, (*snap)->m.files[loc.file].path).substr(c.offset, c.length);
  }
  CHECK(want.size() == expected.size());

  ephemeral_pieces key("loom.cdc.pack-scratch");
  const std::string pack = dir.path() + "/pack";
  auto n = build_pack(**snap, ids, pack, false, &key, 256u << 10);
  REQUIRE_MESSAGE(n.ok(), n.err().to_string());
  CHECK(*n == want.size());
  auto disk = files::read_file(pack);
  REQUIRE(disk.ok());
  for (std::size_t at = 0; at + 64 < want.size(); at += 100000) CHECK(disk->find(want.substr(at, 64)) == std::string::npos);
  std::string back;
  REQUIRE(wire::read_pieces(pack, key, [&](std::string_view p) -> status {
            back.append(p);
            return {};
          }).ok());
  CHECK(back == want);

  ids.push_back(crypto::sha256("not in the dataset"));  // a failed build leaves no file
  CHECK(build_pack(**snap, ids, pack, false, &key, 256u << 10).code() == errc::not_found);
  CHECK_FALSE(std::filesystem::exists(pack));
}
