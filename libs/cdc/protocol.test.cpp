#include "libs/cdc/protocol.hpp"

#include "libs/cdc/test_data.hpp"

#include "loom/v1/sync.pb.h"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::cdc;

namespace {

// A manifest of two files (one ~300 KB in several chunks, one empty), roots set.
manifest two_files() {
  manifest m;
  const std::string data = test::pseudo_random(300000, 9);
  file_entry a{"docs/a.txt", data.size(), {}, 0, chunk_data(data), {}};
  a.chunk_count = a.chunks.size();
  a.root = file_root(a.chunks);
  file_entry e{"empty", 0, file_root({}), 0, {}, {}};
  m.files = {a, e};
  m.root = dataset_root(m.files);
  return m;
}

}  // namespace

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

TEST_CASE("a request's tenant survives the codec, a bad one is refused, and a summary must echo the tenant asked for") {
  auto m = decode_manifest_request(encode(manifest_request{"notes", "acme"}));
  REQUIRE(m.ok());
  CHECK(m->tenant == "acme");
  auto c = decode_chunks_request(encode(chunks_request{"notes", crypto::sha256("r"), {"a"}, "acme"}));
  REQUIRE(c.ok());
  CHECK(c->tenant == "acme");
  pack_request p{"notes", "", {crypto::sha256("x")}, "acme"};
  p.name = pack_name(p.chunks);
  auto p2 = decode_pack_request(encode(p));
  REQUIRE(p2.ok());
  CHECK(p2->tenant == "acme");
  CHECK(decode_manifest_request(encode(manifest_request{"notes", "../x"})).code() == errc::invalid_argument);
  CHECK(decode_manifest_request(encode(manifest_request{"notes", std::string("a\nb")})).code() ==
        errc::invalid_argument);

  const manifest two = two_files();
  CHECK(decode_manifest(encode_summary(two, "acme"), "t", "acme").ok());
  auto other = decode_manifest(encode_summary(two, "globex"), "t", "acme");
  CHECK(other.code() == errc::invalid_argument);
  // Cut before its tenant, a summary of acme's dataset reads as one of the
  // default namespace: refused by a client that asked for acme.
  const std::string whole = encode_summary(two, "acme");
  CHECK(decode_manifest(std::string_view(whole).substr(0, whole.size() - 6), "t", "acme").code() ==
        errc::invalid_argument);
}

TEST_CASE("malformed or hostile sync requests are refused as invalid arguments") {
  CHECK(decode_manifest_request("{").code() == errc::invalid_argument);
  CHECK(decode_manifest_request(encode(manifest_request{"../etc"})).code() == errc::invalid_argument);
  CHECK(decode_manifest_request(encode(manifest_request{".hidden"})).code() == errc::invalid_argument);
  CHECK(decode_manifest_request(std::string("\x08\x07", 2)).code() == errc::invalid_argument);  // dataset: 7
  CHECK(decode_manifest_request(encode(manifest_request{"ok-1.v2"})).ok());
  CHECK(decode_chunks_request(encode(chunks_request{"d", crypto::sha256("r"), {"../x"}})).code() ==
        errc::invalid_argument);
  v1::SyncChunksRequest short_root;
  short_root.set_dataset("d");
  short_root.set_root("abc");
  CHECK(decode_chunks_request(short_root.SerializeAsString()).code() == errc::invalid_argument);
  // A pack whose name does not follow from its list, and an empty pack.
  pack_request p{"d", "pack-0000", {crypto::sha256("x")}};
  CHECK(decode_pack_request(encode(p)).code() == errc::invalid_argument);
  CHECK(decode_pack_request(encode(pack_request{"d", "x", {}})).code() == errc::invalid_argument);
  CHECK(decode_status(encode_status(make_error(errc::not_found, "no dataset"))).code() == errc::not_found);
  CHECK(decode_status(encode_status({})).ok());
}

TEST_CASE("the sync protocol's type frames are the full names of its loom.v1 messages") {
  CHECK(manifest_request_type == v1::SyncManifestRequest::descriptor()->full_name());
  CHECK(chunks_request_type == v1::SyncChunksRequest::descriptor()->full_name());
  CHECK(pack_request_type == v1::SyncPackRequest::descriptor()->full_name());
  CHECK(bye_type == v1::SyncBye::descriptor()->full_name());
  CHECK(manifest_reply_type == v1::SyncManifest::descriptor()->full_name());
  CHECK(chunks_reply_type == v1::SyncChunks::descriptor()->full_name());
  CHECK(pack_done_type == v1::SyncPackDone::descriptor()->full_name());
  CHECK(error_reply_type == v1::Status::descriptor()->full_name());
}

TEST_CASE("lists over the protocol's limits are refused with the errors they always had") {
  chunks_request c{"d", crypto::sha256("r"), std::vector<std::string>(max_paths_per_request + 1, "a")};
  auto r = decode_chunks_request(encode(c));
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.err().message == "ChunksRequest: more than 1024 paths");
  c.paths.resize(max_paths_per_request);
  CHECK(decode_chunks_request(encode(c)).ok());

  pack_request p{"d", "", std::vector<crypto::digest>(max_pack_chunks + 1, crypto::sha256("x"))};
  p.name = pack_name(p.chunks);
  auto q = decode_pack_request(encode(p));
  CHECK(q.code() == errc::invalid_argument);
  CHECK(q.err().message == "PackRequest: want 1..4096 chunk ids");
  p.chunks.resize(max_pack_chunks);
  p.name = pack_name(p.chunks);
  CHECK(decode_pack_request(encode(p)).ok());
}

TEST_CASE("a summary and chunk lists survive the codec and are checked again on arrival") {
  const manifest m = two_files();
  REQUIRE(m.files[0].chunk_count >= 3);
  auto s = decode_manifest(encode_summary(m), "t");
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  CHECK(s->root == m.root);
  CHECK(s->chunking == m.chunking);
  REQUIRE(s->files.size() == 2);
  CHECK(s->files[0].path == "docs/a.txt");
  CHECK(s->files[0].size == 300000);
  CHECK(s->files[0].chunk_count == m.files[0].chunk_count);
  CHECK(s->files[0].chunks.empty());  // a summary

  const std::vector<std::string> paths{"docs/a.txt", "empty"};
  auto lists = decode_chunks(encode_chunks({&m.files[0], &m.files[1]}), paths, "t");
  REQUIRE_MESSAGE(lists.ok(), lists.err().to_string());
  REQUIRE(lists->size() == 2);
  CHECK((*lists)[0].chunks.size() == m.files[0].chunks.size());
  for (std::size_t i = 0; i < m.files[0].chunks.size(); ++i) {  // offsets rebuilt from the lengths
    CHECK((*lists)[0].chunks[i].offset == m.files[0].chunks[i].offset);
    CHECK((*lists)[0].chunks[i].length == m.files[0].chunks[i].length);
    CHECK((*lists)[0].chunks[i].sha256 == m.files[0].chunks[i].sha256);
  }
  CHECK((*lists)[1].chunks.empty());
  // Not the lists asked for: fewer, or in another order.
  CHECK(decode_chunks(encode_chunks({&m.files[0]}), paths, "t").code() == errc::invalid_argument);
  CHECK(decode_chunks(encode_chunks({&m.files[1], &m.files[0]}), paths, "t").code() == errc::invalid_argument);

  // Tampering is caught by the roots, and hostile paths by their check.
  manifest bad = m;
  bad.files[0].chunks[1].sha256[0] ^= 1;
  auto tampered = decode_chunks(encode_chunks({&bad.files[0]}), {"docs/a.txt"}, "t");
  CHECK(tampered.code() == errc::corruption);
  bad = m;
  bad.files[0].size += 1;
  CHECK(decode_manifest(encode_summary(bad), "t").code() == errc::corruption);
  bad = m;
  bad.files[0].path = "../etc/passwd";
  bad.root = dataset_root(bad.files);
  CHECK(decode_manifest(encode_summary(bad), "t").code() == errc::corruption);
}

TEST_CASE("a failed reply of any type carries its error and a reply without a status is refused") {
  const error e = make_error(errc::permission_denied, "\"bob\" may not read dataset \"x\"");
  auto m = decode_manifest(encode_failure(manifest_reply_type, e), "t");
  CHECK(m.code() == errc::permission_denied);
  CHECK(m.err().message == e.message);
  CHECK(decode_chunks(encode_failure(chunks_reply_type, e), {"a"}, "t").code() == errc::permission_denied);
  CHECK(decode_pack_done(encode_failure(pack_done_type, e)).code() == errc::permission_denied);
  CHECK(decode_status(encode_failure(error_reply_type, e)).code() == errc::permission_denied);

  CHECK(decode_manifest("", "t").code() == errc::invalid_argument);
  CHECK(decode_pack_done("").code() == errc::invalid_argument);
  v1::SyncPackDone no_stats;
  no_stats.mutable_status();
  no_stats.set_name("pack-x");
  CHECK(decode_pack_done(no_stats.SerializeAsString()).code() == errc::invalid_argument);
  v1::Status unknown;
  unknown.set_code(static_cast<v1::Code>(99));
  unknown.set_message("from a newer peer");
  CHECK(decode_status(unknown.SerializeAsString()).code() == errc::internal);
}
