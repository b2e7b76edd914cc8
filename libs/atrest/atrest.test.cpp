// Encryption at rest (issue 32 item 3): sealed objects round-trip at every
// size around the chunk boundaries; any changed, cut, extended or reordered
// byte is refused naming the file and the chunk; a 30-day rotation driven by
// an injected clock makes a new KEK for new objects while old ones stay
// readable and untouched; another deployment's keys cannot open them.
#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/sealed.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <random>

using namespace loom;
using namespace loom::atrest;

namespace {

const sys_time t0 = sys_time{} + std::chrono::days(20000);  // a fixed day: the injected clock

std::string random_text(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& ch : s) ch = static_cast<char>(rng());
  return s;
}

std::unique_ptr<kek_store> open_keys(const std::string& dir, sys_time now, kek_options o = {}) {
  auto k = kek_store::open(dir, std::move(o), now);
  REQUIRE_MESSAGE(k.ok(), k.err().to_string());
  return std::move(*k);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("sealed objects round-trip at every size around the chunk boundaries and hide their bytes") {
  files::temp_dir dir("atrest");
  auto keys = open_keys(dir.path() + "/keys", t0);
  const std::uint32_t chunk = 4096;
  for (std::size_t n : {0, 1, 15, 16, 17, 4095, 4096, 4097, 8191, 8192, 8193, 3 * 4096 + 5}) {
    INFO("size " << n);
    const std::string plain = random_text(n, n + 1);
    auto s = seal(plain, *keys, t0, chunk);
    REQUIRE(s.ok());
    const std::size_t chunks = n == 0 ? 1 : (n + chunk - 1) / chunk;
    CHECK(s->size() == sealed_header_size + n + chunks * sealed_tag_size);
    CHECK(looks_sealed(*s));
    if (n >= 16) CHECK_FALSE(has(*s, plain.substr(0, 16)));
    auto back = unseal(*s, *keys, "obj");
    REQUIRE_MESSAGE(back.ok(), back.err().to_string());
    CHECK(*back == plain);
  }
  // Two seals of the same bytes differ (own data key and nonces per object).
  auto a = seal("same bytes", *keys, t0), b = seal("same bytes", *keys, t0);
  REQUIRE((a.ok() && b.ok()));
  CHECK(*a != *b);
  CHECK_FALSE(seal("x", *keys, t0, 100).ok());  // chunk below 4 KiB
}

TEST_CASE("a changed, cut, extended or reordered sealed file is refused naming the file and the chunk") {
  files::temp_dir dir("atrest");
  auto keys = open_keys(dir.path() + "/keys", t0);
  const std::string path = dir.path() + "/shard-000001.bin";
  const std::string plain = random_text(3 * 4096 + 100, 7);
  REQUIRE(write_sealed(path, plain, *keys, t0, 4096).ok());
  CHECK((std::filesystem::status(path).permissions() & std::filesystem::perms::group_all) ==
        std::filesystem::perms::none);
  auto good = read_sealed(path, *keys);
  REQUIRE(good.ok());
  CHECK(*good == plain);
  auto bytes = files::read_file(path);
  REQUIRE(bytes.ok());
  const std::size_t body = sealed_header_size, per = 4096 + sealed_tag_size;

  struct trial {
    const char* what;
    std::string bytes;
    const char* names;
    errc code = errc::corruption;
  };
  auto flip = [&](std::size_t at) {
    std::string b = *bytes;
    b[at] = static_cast<char>(b[at] ^ 0x01);
    return b;
  };
  std::string swapped = *bytes;  // chunks 0 and 1 exchanged
  std::copy(bytes->begin() + body + per, bytes->begin() + body + 2 * per, swapped.begin() + body);
  std::copy(bytes->begin() + body, bytes->begin() + body + per, swapped.begin() + body + per);
  const trial trials[] = {
      {"a byte of chunk 2", flip(body + 2 * per + 10), "chunk 2 (plaintext bytes 8192..12288) fails authentication"},
      {"a tag byte of chunk 0", flip(body + 4096 + 3), "chunk 0 (plaintext bytes 0..4096) fails authentication"},
      {"the KEK version", flip(15), "key-encryption key version 0 is not in", errc::not_found},
      {"the format version", flip(11), "format version 0 is not 1"},
      {"the chunk size", flip(18), "does not unwrap"},
      {"the reserved word", flip(22), "header is damaged"},
      {"the nonce prefix", flip(25), "does not unwrap"},
      {"the wrapped data key", flip(50), "does not unwrap"},
      {"cut at a chunk boundary", bytes->substr(0, body + 3 * per), "chunk 2"},
      {"cut inside a chunk", bytes->substr(0, bytes->size() - 7), "fails authentication"},
      {"extended by a byte", *bytes + "x", "fails authentication"},
      {"chunks swapped", swapped, "chunk 0"},
      {"the magic", flip(0), "not a sealed object"},
      {"shorter than a header", bytes->substr(0, 40), "not a sealed object"},
  };
  for (const auto& t : trials) {
    INFO(std::string(t.what));
    REQUIRE(files::write_atomic(path, t.bytes, 0600).ok());
    auto r = read_sealed(path, *keys);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == t.code);
    CHECK_MESSAGE(has(r.err().message, path), r.err().message);
    CHECK_MESSAGE(has(r.err().message, t.names), r.err().message);
  }
}

TEST_CASE("keys rotate after 30 days by the injected clock: new objects take the new key, old ones stay readable and untouched") {
  files::temp_dir dir("atrest");
  const std::string kdir = dir.path() + "/keys";
  std::vector<std::pair<std::uint32_t, bool>> rotations;
  kek_options o;
  o.on_rotate = [&](std::uint32_t v, bool scheduled) { rotations.push_back({v, scheduled}); };
  auto keys = open_keys(kdir, t0, o);
  CHECK(rotations.empty());  // version 1 of a new deployment is no rotation
  const std::string old_path = dir.path() + "/old.bin";
  REQUIRE(write_sealed(old_path, "written on day 0", *keys, t0).ok());
  const auto old_bytes = files::read_file(old_path);
  REQUIRE(old_bytes.ok());

  // Day 29: still version 1.
  auto day29 = seal("day 29", *keys, t0 + std::chrono::days(29));
  REQUIRE(day29.ok());
  CHECK(keys->list().size() == 1);
  // Day 30: the next object makes version 2 first, reported as scheduled.
  const std::string new_path = dir.path() + "/new.bin";
  REQUIRE(write_sealed(new_path, "written on day 30", *keys, t0 + std::chrono::days(30)).ok());
  REQUIRE(keys->list().size() == 2);
  CHECK(keys->list()[1].version == 2);
  CHECK(keys->list()[1].created_ns == std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          (t0 + std::chrono::days(30)).time_since_epoch())
                                          .count());
  REQUIRE(rotations.size() == 1);
  CHECK(rotations[0] == std::pair<std::uint32_t, bool>{2, true});
  auto new_bytes = files::read_file(new_path);
  REQUIRE(new_bytes.ok());
  CHECK(static_cast<unsigned char>((*new_bytes)[15]) == 2);  // the header names KEK version 2

  // Old objects: never rewritten, still readable — also by another process's store.
  CHECK(files::read_file(old_path).value() == *old_bytes);
  auto other = open_keys(kdir, t0 + std::chrono::days(31), kek_options{.rotation = std::chrono::days(30), .create = false});
  CHECK(read_sealed(old_path, *other).value() == "written on day 0");
  CHECK(read_sealed(new_path, *other).value() == "written on day 30");
  CHECK(unseal(*day29, *other, "day29").value() == "day 29");
  // An explicit rotation is reported as such; the listing needs no key kept.
  CHECK(keys->rotate(t0 + std::chrono::days(32)).value() == 3);
  CHECK(rotations.back() == std::pair<std::uint32_t, bool>{3, false});
  auto listed = list_keks(kdir);
  REQUIRE(listed.ok());
  CHECK(listed->size() == 3);
  // A store opened before version 3 existed reads it from disk when needed.
  REQUIRE(write_sealed(new_path, "version 3", *keys, t0 + std::chrono::days(33)).ok());
  CHECK(read_sealed(new_path, *other).value() == "version 3");
}

TEST_CASE("another deployment's keys, a lost key file and a bad rotation setting are named") {
  files::temp_dir dir("atrest");
  auto mine = open_keys(dir.path() + "/mine", t0);
  auto theirs = open_keys(dir.path() + "/theirs", t0);
  auto s = seal("secret", *mine, t0);
  REQUIRE(s.ok());
  auto foreign = unseal(*s, *theirs, "obj");
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.code() == errc::corruption);
  CHECK_MESSAGE(has(foreign.err().message, "does not unwrap"), foreign.err().message);
  // The KEK file that wrapped it gone (a newer one left): not_found naming the file.
  REQUIRE(mine->rotate(t0).ok());
  std::filesystem::remove(dir.path() + "/mine/kek-000001.key");
  auto fresh = open_keys(dir.path() + "/mine", t0, kek_options{.create = false});
  auto lost = unseal(*s, *fresh, "obj");
  REQUIRE_FALSE(lost.ok());
  CHECK(lost.code() == errc::not_found);
  CHECK_MESSAGE(has(lost.err().message, "obj: at-rest key-encryption key version 1"), lost.err().message);
  CHECK_MESSAGE(has(lost.err().message, "kek-000001.key missing"), lost.err().message);
  CHECK_FALSE(kek_store::open(dir.path() + "/bad", kek_options{.rotation = std::chrono::days(0)}, t0).ok());
  CHECK_FALSE(kek_store::open(dir.path() + "/none", kek_options{.create = false}, t0).ok());
  // A key file others may read is refused.
  std::filesystem::permissions(dir.path() + "/theirs/kek-000001.key", std::filesystem::perms::others_read,
                               std::filesystem::perm_options::add);
  CHECK_FALSE(kek_store::open(dir.path() + "/theirs", {}, t0).ok());
}
