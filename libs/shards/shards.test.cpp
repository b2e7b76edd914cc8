#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/reader.hpp"
#include "libs/shards/testing.hpp"
#include "libs/shards/writer.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <fstream>

using namespace loom;
using namespace loom::shards;
using loom::shards::testing::make_docs;
using loom::shards::testing::temp_dir;

namespace {

using docs_t = std::vector<std::vector<std::uint32_t>>;

manifest write_all(const std::string& dir, const docs_t& docs, dtype t, std::uint64_t target) {
  writer_options o;
  o.dir = dir;
  o.type = t;
  o.target_bytes = target;
  auto w = shard_writer::create(o);
  REQUIRE(w.ok());
  for (const auto& d : docs) REQUIRE(w->append(d).ok());
  auto m = w->finish();
  REQUIRE(m.ok());
  return *m;
}

// Reads every document back through the manifest's shards, in order.
docs_t read_all(const std::string& dir, const manifest& m) {
  docs_t out;
  std::vector<std::uint32_t> buf(1 << 16);
  for (const auto& s : m.shards) {
    auto r = shard_reader::open(dir + "/" + s.name, s.sha256);
    REQUIRE_MESSAGE(r.ok(), r.err().to_string());
    for (std::uint64_t k = 0; k < r->doc_count(); ++k) {
      auto d = r->document(k, buf);
      REQUIRE(d.ok());
      out.emplace_back(d->begin(), d->end());
    }
  }
  return out;
}

void overwrite(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

template <class T>
void patch(std::string& file, std::size_t at, T v) {
  std::memcpy(file.data() + at, &v, sizeof(T));
}

// One small valid shard (3 documents, 10 uint16 tokens) and its file bytes.
struct small_shard {
  temp_dir tmp;
  std::string path;
  std::string bytes;
  small_shard() {
    docs_t docs = {{1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10}};
    auto m = write_all(tmp.path(), docs, dtype::uint16, 1 << 20);
    path = tmp.path() + "/" + m.shards.at(0).name;
    bytes = *files::read_file(path);
  }
  std::string refusal(const std::string& corrupt, std::string_view sha = {}) {
    overwrite(path, corrupt);
    auto r = shard_reader::open(path, sha);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::corruption);
    CHECK(r.err().message.find("shard-000001.bin: ") != std::string::npos);
    return r.err().message;
  }
};

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("documents of a uint16 vocabulary come back identical from one shard") {
  temp_dir tmp;
  const auto docs = make_docs(200, 50, 50257, 1);
  auto m = write_all(tmp.path(), docs, dtype_for_vocab(50257), 16 << 20);
  REQUIRE(m.shards.size() == 1);
  CHECK(m.shards[0].type == dtype::uint16);
  CHECK(read_all(tmp.path(), m) == docs);
}

TEST_CASE("documents with ids above 65535 round trip through a uint32 shard") {
  temp_dir tmp;
  const auto docs = make_docs(100, 40, 200000, 2);
  REQUIRE(dtype_for_vocab(200000) == dtype::uint32);
  auto m = write_all(tmp.path(), docs, dtype::uint32, 16 << 20);
  CHECK(m.shards.at(0).type == dtype::uint32);
  CHECK(read_all(tmp.path(), m) == docs);
  auto r = shard_reader::open(tmp.path() + "/" + m.shards[0].name);
  REQUIRE(r.ok());
  std::vector<std::uint32_t> buf(3);
  std::vector<std::uint32_t> flat;
  for (const auto& d : docs) flat.insert(flat.end(), d.begin(), d.end());
  auto t = r->tokens(5, 3, buf);
  REQUIRE(t.ok());
  CHECK(std::vector<std::uint32_t>(t->begin(), t->end()) ==
        std::vector<std::uint32_t>(flat.begin() + 5, flat.begin() + 8));
  CHECK(r->tokens(flat.size() - 1, 2, buf).code() == errc::invalid_argument);
  CHECK(r->document(docs.size(), buf).code() == errc::invalid_argument);
}

TEST_CASE("a uint16 writer refuses an id of 65536 and appends nothing") {
  temp_dir tmp;
  writer_options o;
  o.dir = tmp.path();
  auto w = shard_writer::create(o);
  REQUIRE(w.ok());
  std::vector<std::uint32_t> doc = {1, 65535, 65536};
  auto s = w->append(doc);
  CHECK(s.code() == errc::invalid_argument);
  CHECK(contains(s.err().message, "65536"));
  auto m = w->finish();
  REQUIRE(m.ok());
  CHECK(m->shards.empty());
}

TEST_CASE("a small size limit rolls documents into several numbered shards within the limit") {
  temp_dir tmp;
  const auto docs = make_docs(300, 60, 1000, 3);
  const std::uint64_t target = 1024;
  auto m = write_all(tmp.path(), docs, dtype::uint16, target);
  REQUIRE(m.shards.size() >= 5);
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    CHECK(m.shards[i].name == shard_file_name(i + 1));
    CHECK(m.shards[i].bytes <= target);  // no document here is larger than the target
  }
  CHECK(m.shards[0].name == "shard-000001.bin");
  CHECK(read_all(tmp.path(), m) == docs);
}

TEST_CASE("manifest.json lists each shard's sha256, bytes, tokens, docs, dtype and node") {
  temp_dir tmp;
  const auto docs = make_docs(120, 40, 1000, 4);
  writer_options o;
  o.dir = tmp.path();
  o.target_bytes = 2048;
  o.place = [](const shard_info& s) { return "node-" + std::to_string(s.tokens % 3); };
  auto w = shard_writer::create(o);
  REQUIRE(w.ok());
  for (const auto& d : docs) REQUIRE(w->append(d).ok());
  auto written = w->finish();
  REQUIRE(written.ok());
  auto m = read_manifest(tmp.path());
  REQUIRE(m.ok());
  REQUIRE(m->shards.size() == written->shards.size());
  std::uint64_t tokens = 0, ndocs = 0;
  for (const auto& s : m->shards) {
    auto bytes = files::read_file(tmp.path() + "/" + s.name);
    REQUIRE(bytes.ok());
    CHECK(s.sha256 == crypto::sha256_hex(*bytes));
    CHECK(s.bytes == bytes->size());
    auto r = shard_reader::open(tmp.path() + "/" + s.name);
    REQUIRE(r.ok());
    CHECK(s.tokens == r->token_count());
    CHECK(s.docs == r->doc_count());
    CHECK(s.type == dtype::uint16);
    CHECK(s.node == "node-" + std::to_string(s.tokens % 3));
    tokens += s.tokens;
    ndocs += s.docs;
  }
  std::uint64_t want = 0;
  for (const auto& d : docs) want += d.size();
  CHECK(tokens == want);
  CHECK(m->total_tokens() == want);
  CHECK(ndocs == docs.size());
}

TEST_CASE("a manifest naming a shard outside its directory is refused") {
  auto m = parse_manifest(R"({"format":"loom-shards","version":1,"shards":[{"name":"../x.bin",)"
                          R"("sha256":"0000000000000000000000000000000000000000000000000000000000000000",)"
                          R"("bytes":1,"tokens":1,"docs":1,"dtype":"uint16","node":""}]})",
                          "m.json");
  REQUIRE_FALSE(m.ok());
  CHECK(m.code() == errc::corruption);
  CHECK(contains(m.err().message, "../x.bin"));
}

// Found by tests/fuzz (fuzz_manifest): a count written as a float beyond
// 2^64 was converted to uint64 (undefined behaviour); -1 wrapped and 1.5
// truncated. This is the crashing input, byte for byte.
TEST_CASE("a manifest whose counts are not integers from 0 to 2^64-1 is refused naming the shard") {
  const std::string fuzzed = R"({
  "format": "loom-shards",
  "shards": [
    {
      "bytes": 324,
      "docs": 5,
      "dtype": "uint32",
      "name": "shard-0_in",
      "node": "",
      "sha256": "49ed34b334f75348747630f9d8d84e62c2238a3fe76a5273f4432c3632d2b08d",
      "tokens": 33333333333333333333333333333333355
    }
  ],
  "version": 1
}
)";
  auto m = parse_manifest(fuzzed, "m.json");
  REQUIRE_FALSE(m.ok());
  CHECK(m.code() == errc::corruption);
  CHECK(contains(m.err().message, "m.json: shard-0_in: bytes, tokens and docs must be integers"));
  auto with = [](std::string_view count, std::string_view version = "1") {
    return parse_manifest(R"({"format":"loom-shards","version":)" + std::string(version) +
                              R"(,"shards":[{"name":"a.bin","sha256":")" + std::string(64, '0') +
                              R"(","bytes":1,"tokens":)" + std::string(count) + R"(,"docs":1,"dtype":"uint16"}]})",
                          "m.json");
  };
  for (auto bad : {"-1", "1.5", "1e30", "\"7\"", "true", "null"}) CHECK_FALSE(with(bad).ok());
  REQUIRE(with("18446744073709551615").ok());
  CHECK(with("18446744073709551615")->shards[0].tokens == UINT64_MAX);
  for (auto bad : {"1.0", "1e40", "-1", "\"1\""}) CHECK_FALSE(with("1", bad).ok());
}

TEST_CASE("the untouched small shard opens and its sha256 matches") {
  small_shard s;
  auto r = shard_reader::open(s.path, crypto::sha256_hex(s.bytes));
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  CHECK(r->token_count() == 10);
  CHECK(r->doc_count() == 3);
  CHECK(r->document_size(1) == 4);
}

TEST_CASE("a shard with a bad magic is refused by name") {
  small_shard s;
  std::string c = s.bytes;
  c[0] = 'X';
  CHECK(contains(s.refusal(c), "bad magic"));
}

TEST_CASE("a truncated shard is refused with its real and expected size") {
  small_shard s;
  CHECK(contains(s.refusal(s.bytes.substr(0, s.bytes.size() - 5)),
                 "size " + std::to_string(s.bytes.size() - 5) + " but header says " +
                     std::to_string(s.bytes.size())));
  CHECK(contains(s.refusal(s.bytes.substr(0, 20)), "truncated: 20 bytes"));
}

TEST_CASE("a header that lies about its sizes is refused") {
  small_shard s;
  std::string c = s.bytes;
  patch<std::uint64_t>(c, 16, 11);  // token_count 11: index offset no longer agrees
  CHECK(contains(s.refusal(c), "index offset 84 but 11 tokens put it at 86"));
  c = s.bytes;
  patch<std::uint64_t>(c, 16, 1000000);
  CHECK(contains(s.refusal(c), "header says 1000000 tokens"));
  c = s.bytes;
  patch<std::uint64_t>(c, 48, 999);
  CHECK(contains(s.refusal(c), "header file_size 999"));
}

TEST_CASE("a document index out of range or out of order is refused") {
  small_shard s;
  const std::size_t index = 64 + 10 * 2;
  std::string c = s.bytes;
  patch<std::uint64_t>(c, index + 2 * 8, 11);
  CHECK(contains(s.refusal(c), "document 2 starts at 11, out of range of 10 tokens"));
  c = s.bytes;
  patch<std::uint64_t>(c, index + 1 * 8, 8);
  CHECK(contains(s.refusal(c), "not monotonic: document 2"));
  c = s.bytes;
  patch<std::uint64_t>(c, index, 1);
  CHECK(contains(s.refusal(c), "document 0 starts at 1"));
}

TEST_CASE("a flipped payload byte is refused against the manifest sha256") {
  small_shard s;
  const std::string sha = crypto::sha256_hex(s.bytes);
  std::string c = s.bytes;
  c[64 + 3] ^= 0x01;
  const std::string msg = s.refusal(c, sha);
  CHECK(contains(msg, "sha256 " + crypto::sha256_hex(c) + " does not match manifest " + sha));
  CHECK(shard_reader::open(s.path).ok());  // structurally fine: only the hash catches it
}

TEST_CASE("an unknown dtype or version is refused") {
  small_shard s;
  std::string c = s.bytes;
  patch<std::uint32_t>(c, 12, 7);
  CHECK(contains(s.refusal(c), "unknown dtype 7"));
  c = s.bytes;
  patch<std::uint32_t>(c, 8, 2);
  CHECK(contains(s.refusal(c), "unsupported version 2"));
}

TEST_CASE("a missing shard is not_found, not corruption") {
  temp_dir tmp;
  CHECK(shard_reader::open(tmp.path() + "/shard-000009.bin").code() == errc::not_found);
}
