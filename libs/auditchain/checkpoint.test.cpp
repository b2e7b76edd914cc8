#include "libs/auditchain/anchor_file.hpp"
#include "libs/auditchain/checkpoint.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>

using namespace loom::auditchain;
using loom::errc;

namespace {
unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}
hash32 some_hash(std::uint8_t seed) {
  hash32 h{};
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::uint8_t>(seed + i * 7);
  return h;
}
}  // namespace

TEST_CASE("a checkpoint signed with the anchor key verifies and any flipped bit fails") {
  loom::files::temp_dir dir("auditchain");
  auto signer = anchor_signer::generate(dir.path());
  REQUIRE_MESSAGE(signer.ok(), signer.err().to_string());
  anchor_keys keys;
  REQUIRE(keys.add(signer->public_key()).ok());
  checkpoint c = signer->sign(1000, some_hash(3), 1700000000000000000);
  CHECK(c.key_id == signer->key_id());
  CHECK(c.key_id.size() == 16);
  CHECK(c.signature.size() == 64);
  CHECK(keys.verify(c).ok());
  int failures = 0, trials = 0;
  for (std::size_t bit = 0; bit < c.signature.size() * 8; ++bit) {
    checkpoint t = c;
    t.signature[bit / 8] = static_cast<char>(t.signature[bit / 8] ^ (1 << (bit % 8)));
    ++trials;
    failures += !keys.verify(t).ok();
  }
  for (std::size_t bit = 0; bit < 256; ++bit) {
    checkpoint t = c;
    t.row_hash[bit / 8] ^= static_cast<std::uint8_t>(1 << (bit % 8));
    ++trials;
    failures += !keys.verify(t).ok();
  }
  for (int bit = 0; bit < 64; ++bit) {
    checkpoint t = c, u = c;
    t.seq ^= std::uint64_t{1} << bit;
    u.unix_ns ^= std::int64_t(std::uint64_t{1} << bit);
    trials += 2;
    failures += !keys.verify(t).ok();
    failures += !keys.verify(u).ok();
  }
  CHECK(failures == trials);
}

TEST_CASE("a checkpoint by an unknown key is refused naming the key") {
  loom::files::temp_dir dir("auditchain");
  auto a = anchor_signer::generate(dir.path() + "/a");
  auto b = anchor_signer::generate(dir.path() + "/b");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  anchor_keys keys;
  REQUIRE(keys.add(a->public_key()).ok());
  auto r = keys.verify(b->sign(5, some_hash(1), 1));
  CHECK(r.code() == errc::unauthenticated);
  CHECK(r.err().message.find(b->key_id()) != std::string::npos);
}

TEST_CASE("the signing key file is private, the public key is found by verifiers") {
  loom::files::temp_dir dir("auditchain");
  const std::string keys_dir = dir.path() + "/keys";
  auto s = anchor_signer::load_or_generate(keys_dir);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  CHECK(mode_of(keys_dir + "/anchor-signing.key") == 0600);
  CHECK(mode_of(keys_dir) == 0700);
  CHECK(mode_of(keys_dir + "/anchor-" + s->key_id() + ".pub") == 0644);
  auto again = anchor_signer::load_or_generate(keys_dir);
  REQUIRE(again.ok());
  CHECK(again->key_id() == s->key_id());  // loaded, not replaced
  CHECK(anchor_signer::generate(keys_dir).code() == errc::already_exists);
  auto trusted = anchor_keys::load(keys_dir);
  REQUIRE(trusted.ok());
  CHECK(trusted->size() == 1);
  CHECK(trusted->verify(again->sign(9, some_hash(9), 9)).ok());

  ::chmod((keys_dir + "/anchor-signing.key").c_str(), 0644);
  auto loose = anchor_signer::load(keys_dir);
  CHECK(loose.code() == errc::permission_denied);
  CHECK(loose.err().message.find("chmod 600") != std::string::npos);
  CHECK(anchor_signer::load(dir.path() + "/none").code() == errc::not_found);
}

TEST_CASE("a checkpoint is due after 1,000 records or 60 s of the injected clock, only if the chain grew") {
  anchor_policy p;
  constexpr std::int64_t s = 1'000'000'000;
  const std::int64_t t0 = 1700000000 * s;
  CHECK_FALSE(p.due(0, t0, 999, t0 + 59 * s));
  CHECK(p.due(0, t0, 1000, t0));
  CHECK(p.due(1000, t0, 2000, t0 + s));
  CHECK_FALSE(p.due(1000, t0, 1999, t0 + 59 * s));
  CHECK(p.due(1000, t0, 1001, t0 + 60 * s));
  CHECK_FALSE(p.due(1000, t0, 1000, t0 + 3600 * s));  // nothing new to anchor
}

TEST_CASE("the anchor file round-trips checkpoints, and a torn last line is skipped then cut off") {
  loom::files::temp_dir dir("auditchain");
  auto signer = anchor_signer::generate(dir.path());
  REQUIRE(signer.ok());
  const std::string path = dir.path() + "/anchors.log";
  std::vector<checkpoint> written;
  {
    auto f = anchor_file::open(path);
    REQUIRE_MESSAGE(f.ok(), f.err().to_string());
    for (std::uint64_t seq : {1000u, 2000u, 2345u}) {
      written.push_back(signer->sign(seq, some_hash(static_cast<std::uint8_t>(seq)), 17 * seq));
      REQUIRE((*f)->append(written.back()).ok());
    }
  }
  auto back = read_anchor_file(path);
  REQUIRE(back.ok());
  CHECK(back->checkpoints == written);
  CHECK_FALSE(back->torn_tail);
  {
    std::ofstream out(path, std::ios::app);
    out << "v1 3000 51000 " << signer->key_id() << " 00ff";  // crash mid-append
  }
  back = read_anchor_file(path);
  REQUIRE(back.ok());
  CHECK(back->checkpoints == written);
  CHECK(back->torn_tail);
  {
    auto f = anchor_file::open(path);
    REQUIRE(f.ok());
    written.push_back(signer->sign(3000, some_hash(30), 51000));
    REQUIRE((*f)->append(written.back()).ok());
  }
  back = read_anchor_file(path);
  REQUIRE(back.ok());
  CHECK(back->checkpoints == written);
  CHECK_FALSE(back->torn_tail);
  {
    std::ofstream out(path, std::ios::app);
    out << "v1 nonsense\n";
  }
  auto bad = read_anchor_file(path);
  CHECK(bad.code() == errc::corruption);
  CHECK(bad.err().message.find("line 5") != std::string::npos);
  CHECK(read_anchor_file(dir.path() + "/missing.log").code() == errc::not_found);
  // Opening in a directory that is not there names the file and the cause.
  auto nowhere = anchor_file::open(dir.path() + "/no/such/dir/anchors.log");
  CHECK(nowhere.code() == errc::not_found);
  CHECK(nowhere.err().message.find("open " + dir.path() + "/no/such/dir/anchors.log: No such file") != std::string::npos);
}
