// Shards sealed at rest (issue 32 item 3): a sealed dataset lists the same
// manifest as a plain one of the same documents and reads back the same
// tokens; a changed byte is refused naming the file and the chunk, by the
// reader and by the full check; a 30-day rotation by an injected clock seals
// new shards under a new KEK while old shards stay readable and untouched;
// without keys, or with another deployment's, a sealed shard is refused by
// name.
#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/object.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/check.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/shards/testing.hpp"
#include "libs/shards/writer.hpp"

#include <doctest/doctest.h>

#include <fstream>

using namespace loom;
using namespace loom::shards;
using testing::temp_dir;

namespace {

using docs_t = std::vector<std::vector<std::uint32_t>>;
const atrest::sys_time t0 = atrest::sys_time{} + std::chrono::days(20000);

manifest write_docs(const std::string& dir, const docs_t& docs, atrest::kek_store* keys, atrest::sys_time now) {
  writer_options o;
  o.dir = dir;
  o.target_bytes = 4096;  // several shards
  o.seal = keys;
  o.now = [now] { return now; };
  auto w = shard_writer::create(o);
  REQUIRE(w.ok());
  for (const auto& d : docs) REQUIRE(w->append(d).ok());
  auto m = w->finish();
  REQUIRE_MESSAGE(m.ok(), m.err().to_string());
  return *m;
}

std::unique_ptr<atrest::kek_store> keys_in(const std::string& dir, atrest::sys_time now) {
  auto k = atrest::kek_store::open(dir, {}, now);
  REQUIRE_MESSAGE(k.ok(), k.err().to_string());
  return std::move(*k);
}

std::uint32_t kek_version_of(const std::string& path) {
  auto b = files::read_file(path).value();
  REQUIRE(b.size() >= 16);
  const auto* h = reinterpret_cast<const unsigned char*>(b.data());
  return (std::uint32_t{h[12]} << 24) | (std::uint32_t{h[13]} << 16) | (std::uint32_t{h[14]} << 8) | h[15];
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

std::vector<std::uint32_t> all_tokens(dataset& d) {
  std::vector<std::uint32_t> out(d.token_count());
  REQUIRE(d.read(0, out).ok());
  return out;
}

}  // namespace

TEST_CASE("a sealed dataset has the plain one's manifest and tokens, and passes the cheap and full checks") {
  temp_dir tmp;
  auto keys = keys_in(tmp.path() + "/keys", t0);
  const docs_t docs = testing::make_docs(300, 40, 50000, 7);
  const manifest plain = write_docs(tmp.path() + "/plain", docs, nullptr, t0);
  const manifest sealed = write_docs(tmp.path() + "/sealed", docs, keys.get(), t0);
  REQUIRE(sealed.shards.size() > 1);
  REQUIRE(sealed.shards.size() == plain.shards.size());
  for (std::size_t i = 0; i < sealed.shards.size(); ++i) {
    CHECK(sealed.shards[i].sha256 == plain.shards[i].sha256);  // identity is the plaintext's
    CHECK(sealed.shards[i].bytes == plain.shards[i].bytes);
    const std::string path = tmp.path() + "/sealed/" + sealed.shards[i].name;
    CHECK(atrest::is_sealed_file(path));
    CHECK_FALSE(atrest::is_sealed_file(tmp.path() + "/plain/" + plain.shards[i].name));
    CHECK(files::read_file(path).value() != files::read_file(tmp.path() + "/plain/" + plain.shards[i].name).value());
  }
  atrest::set_process_keys(std::shared_ptr<atrest::kek_store>(keys.get(), [](atrest::kek_store*) {}));
  auto a = dataset::open(tmp.path() + "/plain");
  auto b = dataset::open(tmp.path() + "/sealed");
  REQUIRE_MESSAGE(b.ok(), b.err().to_string());
  CHECK(all_tokens(*a) == all_tokens(*b));
  for (auto depth : {check_depth::cheap, check_depth::full}) {
    auto p = check_shards(tmp.path() + "/sealed", sealed.shards, depth);
    REQUIRE(p.ok());
    CHECK_MESSAGE(p->empty(), describe(*p));
  }
  atrest::set_process_keys(nullptr);
}

TEST_CASE("a changed, cut or keyless sealed shard is refused naming the file") {
  temp_dir tmp;
  auto keys = keys_in(tmp.path() + "/keys", t0);
  const manifest m = write_docs(tmp.path() + "/d", testing::make_docs(100, 40, 50000, 3), keys.get(), t0);
  const std::string name = m.shards.at(0).name, path = tmp.path() + "/d/" + name;
  const std::string good = files::read_file(path).value();

  SUBCASE("a flipped ciphertext byte") {
    std::string bad = good;
    bad[atrest::sealed_header_size + 100] ^= 0x01;
    REQUIRE(files::write_atomic(path, bad).ok());
    auto r = shard_reader::open(path, m.shards[0].sha256, keys.get());
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::corruption);
    CHECK(contains(r.err().message, path));
    CHECK(contains(r.err().message, "chunk 0"));
    atrest::set_process_keys(std::shared_ptr<atrest::kek_store>(keys.get(), [](atrest::kek_store*) {}));
    auto p = check_shards(tmp.path() + "/d", m.shards, check_depth::full);
    atrest::set_process_keys(nullptr);
    REQUIRE(p.ok());
    REQUIRE(p->size() == 1);
    CHECK(p->at(0).shard == name);
    CHECK(contains(p->at(0).what, "cannot be unsealed"));
    CHECK(contains(p->at(0).what, "fails authentication"));
  }
  SUBCASE("a file cut short: the cheap check sees the size, the reader the chunk") {
    REQUIRE(files::write_atomic(path, good.substr(0, good.size() - 5)).ok());
    auto p = check_shards(tmp.path() + "/d", m.shards, check_depth::cheap);
    REQUIRE(p.ok());
    REQUIRE(p->size() == 1);
    CHECK(contains(p->at(0).what, "bytes, the manifest says " + std::to_string(m.shards[0].bytes)));
    CHECK_FALSE(shard_reader::open(path, {}, keys.get()).ok());
  }
  SUBCASE("no keys in this process") {
    atrest::set_process_keys(nullptr);
    auto r = shard_reader::open(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::not_found);
    CHECK(contains(r.err().message, path + " is sealed at rest"));
    CHECK(contains(r.err().message, "keys/atrest"));
  }
  SUBCASE("another deployment's keys") {
    auto other = keys_in(tmp.path() + "/other-keys", t0);
    auto r = shard_reader::open(path, {}, other.get());
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.err().message, path));
    CHECK(contains(r.err().message, "does not unwrap"));
  }
}

TEST_CASE("a 30-day rotation by the injected clock seals new shards under a new KEK, old ones stay as they were") {
  temp_dir tmp;
  auto keys = keys_in(tmp.path() + "/keys", t0);
  const manifest old_m = write_docs(tmp.path() + "/old", testing::make_docs(100, 40, 50000, 11), keys.get(), t0);
  const std::string old_path = tmp.path() + "/old/" + old_m.shards.at(0).name;
  const std::string old_bytes = files::read_file(old_path).value();
  CHECK(kek_version_of(old_path) == 1);

  // Day 29: still version 1. Day 31: the next shard's wrap makes version 2.
  const manifest d29 = write_docs(tmp.path() + "/d29", testing::make_docs(10, 40, 50000, 12), keys.get(),
                                  t0 + std::chrono::days(29));
  CHECK(kek_version_of(tmp.path() + "/d29/" + d29.shards.at(0).name) == 1);
  const manifest d31 = write_docs(tmp.path() + "/d31", testing::make_docs(10, 40, 50000, 13), keys.get(),
                                  t0 + std::chrono::days(31));
  CHECK(kek_version_of(tmp.path() + "/d31/" + d31.shards.at(0).name) == 2);
  CHECK(keys->list().size() == 2);

  CHECK(files::read_file(old_path).value() == old_bytes);  // nothing rewritten
  auto r = shard_reader::open(old_path, old_m.shards[0].sha256, keys.get());
  CHECK_MESSAGE(r.ok(), r.err().to_string());
  // A reader that opens the key directory afresh (another process) reads both.
  atrest::kek_options reader;
  reader.create = false;
  auto fresh = atrest::kek_store::open(tmp.path() + "/keys", reader, t0 + std::chrono::days(31));
  REQUIRE(fresh.ok());
  CHECK(shard_reader::open(old_path, old_m.shards[0].sha256, fresh->get()).ok());
  CHECK(shard_reader::open(tmp.path() + "/d31/" + d31.shards[0].name, d31.shards[0].sha256, fresh->get()).ok());
}
