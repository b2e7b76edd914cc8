// sealed_writer: a sealed file written in pieces is the object seal() would
// make of the whole (it unseals to the same bytes, at every size around the
// chunk boundaries and for any way of cutting the input), its facts are the
// plaintext's SHA-256 and size, and a writer dropped or failing (fsync fails:
// the fault point) leaves neither the file nor a temporary behind.
#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/sealed.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

using namespace loom;
using namespace loom::atrest;

namespace {

const sys_time t0 = sys_time{} + std::chrono::days(20000);

std::string random_text(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& ch : s) ch = static_cast<char>(rng());
  return s;
}

std::size_t entries(const std::string& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a sealed file written in pieces unseals to its plaintext at every size and cut, with its hash and size") {
  files::temp_dir dir("sealed-writer");
  auto keys = kek_store::open(dir.path() + "/keys", {}, t0);
  REQUIRE(keys.ok());
  const std::uint32_t chunk = 4096;
  std::mt19937 rng(11);
  for (std::size_t n : {0, 1, 4095, 4096, 4097, 8192, 8193, 3 * 4096 + 5}) {
    for (int cut = 0; cut < 3; ++cut) {
      INFO("size " << n << ", cut " << cut);
      const std::string plain = random_text(n, n + 3);
      const std::string path = dir.path() + "/obj-" + std::to_string(n) + "-" + std::to_string(cut);
      auto w = sealed_writer::create(path, **keys, t0, 0600, chunk);
      REQUIRE(w.ok());
      // cut 0: one piece; 1: byte by byte at the start, then the rest; 2: random pieces.
      std::size_t at = 0;
      while (at < n) {
        std::size_t take = cut == 0 ? n : cut == 1 ? (at < 10 ? 1 : n - at) : 1 + rng() % 6000;
        take = std::min(take, n - at);
        REQUIRE((*w)->append(std::string_view(plain).substr(at, take)).ok());
        at += take;
      }
      auto facts = (*w)->finish();
      REQUIRE(facts.ok());
      CHECK(facts->bytes == n);
      CHECK(facts->sha256_hex == crypto::sha256_hex(plain));
      auto back = read_sealed(path, **keys);
      REQUIRE(back.ok());
      CHECK(*back == plain);
      // The layout seal() makes: a whole chunk last when the size is a multiple of it.
      const std::size_t chunks = n == 0 ? 1 : (n + chunk - 1) / chunk;
      CHECK(std::filesystem::file_size(path) == sealed_header_size + n + chunks * sealed_tag_size);
    }
  }
  CHECK(entries(dir.path()) == 1 + 8 * 3);  // the key directory and the objects: no temporaries
}

TEST_CASE("a sealed writer dropped unfinished, or whose fsync fails, leaves nothing behind and names the file") {
  files::temp_dir dir("sealed-writer");
  auto keys = kek_store::open(dir.path() + "/keys", {}, t0);
  REQUIRE(keys.ok());
  const std::string path = dir.path() + "/obj";
  {
    auto w = sealed_writer::create(path, **keys, t0, 0600, 4096);
    REQUIRE(w.ok());
    REQUIRE((*w)->append(random_text(10000, 1)).ok());
  }
  CHECK(entries(dir.path()) == 1);

  const std::string faults = dir.path() + "/faults";
  REQUIRE(files::make_dirs(faults));
  std::ofstream(faults + "/fsync").put('1');
  ::setenv("LOOM_FAULTS_DIR", faults.c_str(), 1);
  auto w = sealed_writer::create(path, **keys, t0, 0600, 4096);
  REQUIRE(w.ok());
  REQUIRE((*w)->append(random_text(10000, 2)).ok());
  auto f = (*w)->finish();
  ::unsetenv("LOOM_FAULTS_DIR");
  REQUIRE_FALSE(f.ok());
  CHECK(f.err().message.find("fsync " + path + ".tmp.") == 0);
  CHECK_FALSE((*w)->append("more").ok());  // refuses after an error
  w->reset();
  CHECK(entries(dir.path()) == 2);  // the keys and the fault points only
  CHECK_FALSE(std::filesystem::exists(path));
}

// sealed_reader: the pull side (the importer's spill reads exact byte counts).
TEST_CASE("a sealed file read back in pieces of any size gives its plaintext, and a changed chunk is refused naming it") {
  files::temp_dir dir("sealed-reader");
  auto keys = kek_store::open(dir.path() + "/keys", {}, t0);
  REQUIRE(keys.ok());
  const std::uint32_t chunk = 4096;
  std::mt19937 rng(5);
  for (std::size_t n : {0, 1, 4095, 4096, 4097, 3 * 4096 + 5}) {
    INFO("size " << n);
    const std::string plain = random_text(n, n + 9);
    const std::string path = dir.path() + "/obj-" + std::to_string(n);
    REQUIRE(write_sealed(path, plain, **keys, t0, chunk).ok());
    auto r = sealed_reader::open(path, **keys);
    REQUIRE(r.ok());
    CHECK((*r)->size() == n);
    std::string back;
    for (;;) {
      std::string piece(1 + rng() % 5000, '\0');
      auto got = (*r)->read(piece.data(), piece.size());
      REQUIRE(got.ok());
      back.append(piece.data(), *got);
      if (*got < piece.size()) break;  // fewer only at the end
    }
    CHECK(back == plain);
    auto end = (*r)->read(back.data(), 1);
    REQUIRE(end.ok());
    CHECK(*end == 0);
  }
  // A byte of chunk 1 flipped: chunk 0 reads, chunk 1 is refused naming the file and its bytes.
  const std::string path = dir.path() + "/obj-" + std::to_string(3 * 4096 + 5);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(sealed_header_size + 4096 + sealed_tag_size + 7));
    f.put('\x5a');
  }
  auto r = sealed_reader::open(path, **keys);
  REQUIRE(r.ok());
  std::string buf(4096, '\0');
  REQUIRE((*r)->read(buf.data(), buf.size()).ok());
  auto bad = (*r)->read(buf.data(), 1);
  REQUIRE(!bad.ok());
  CHECK(bad.err().message.find(path + ": chunk 1 (plaintext bytes 4096..8192) fails authentication") != std::string::npos);
  // Not sealed at all, or another deployment's keys: refused at open.
  REQUIRE(files::write_atomic(dir.path() + "/plain", "just text, long enough to be more than a header would be .............................................").ok());
  auto plain = sealed_reader::open(dir.path() + "/plain", **keys);
  REQUIRE(!plain.ok());
  CHECK(plain.err().message.find("not a sealed object") != std::string::npos);
  auto other = kek_store::open(dir.path() + "/other-keys", {}, t0);
  REQUIRE(other.ok());
  auto theirs = sealed_reader::open(dir.path() + "/obj-1", **other);
  REQUIRE(!theirs.ok());
}
