#include "libs/cdc/protocol.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::cdc;

TEST_CASE("sync requests survive encoding and decoding") {
  chunks_request c{"wiki-en", crypto::sha256("root"), {"a.txt", "sub/b.bin"}};
  auto c2 = decode_chunks_request(encode(c));
  REQUIRE(c2.ok());
  CHECK(c2->dataset == "wiki-en");
  CHECK(c2->root == c.root);
  CHECK(c2->paths == c.paths);

  pack_request p{"wiki-en", "", {crypto::sha256("x"), crypto::sha256("y")}};
  p.name = pack_name(p.chunks);
  auto p2 = decode_pack_request(encode(p));
  REQUIRE(p2.ok());
  CHECK(p2->chunks == p.chunks);
  CHECK(p2->name.size() == 45);

  wire::transfer_stats bulk;
  bulk.chunks_sent = 5;
  bulk.chunks_skipped = 3;
  bulk.complete = true;
  auto d = decode_pack_done(encode({}, pack_done{p.name, bulk}));
  REQUIRE(d.ok());
  CHECK(d->bulk.chunks_sent == 5);
  CHECK(d->bulk.chunks_skipped == 3);
  auto failed = decode_pack_done(encode(make_error(errc::conflict, "moved"), pack_done{}));
  CHECK(failed.code() == errc::conflict);
  CHECK(failed.err().message == "moved");
}

TEST_CASE("malformed or hostile sync requests are refused as invalid arguments") {
  CHECK(decode_manifest_request("{").code() == errc::invalid_argument);
  CHECK(decode_manifest_request(R"({"dataset":"../etc"})").code() == errc::invalid_argument);
  CHECK(decode_manifest_request(R"({"dataset":".hidden"})").code() == errc::invalid_argument);
  CHECK(decode_manifest_request(R"({"dataset":7})").code() == errc::invalid_argument);
  CHECK(decode_manifest_request(R"({"dataset":"ok-1.v2"})").ok());
  const std::string root(64, 'a');
  CHECK(decode_chunks_request(R"({"dataset":"d","root":")" + root + R"(","paths":["../x"]})").code() ==
        errc::invalid_argument);
  CHECK(decode_chunks_request(R"({"dataset":"d","root":"abc","paths":[]})").code() == errc::invalid_argument);
  // A pack whose name does not follow from its list, and an empty pack.
  pack_request p{"d", "pack-0000", {crypto::sha256("x")}};
  CHECK(decode_pack_request(encode(p)).code() == errc::invalid_argument);
  CHECK(decode_pack_request(R"({"dataset":"d","name":"x","chunks":[]})").code() == errc::invalid_argument);
  CHECK(decode_status(R"({"code":"not_found","message":"no dataset"})").code() == errc::not_found);
  CHECK(decode_status(R"({"code":"ok","message":""})").ok());
}
