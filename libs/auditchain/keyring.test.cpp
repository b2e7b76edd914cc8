#include "libs/auditchain/keyring.hpp"

#include "libs/files/secret_files.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sys/stat.h>

using namespace loom::auditchain;
using loom::errc;
using namespace std::chrono_literals;

namespace loom::auditchain {
// Reads the raw keys a keyring holds in memory, for canary checks.
struct keyring_test_access {
  static std::vector<std::string> raw_keys(keyring& k) {
    std::lock_guard lock(k.mu_);
    std::vector<std::string> out;
    for (auto& [v, kek] : k.keks_) out.emplace_back(reinterpret_cast<const char*>(kek.key.data()), kek.key.size());
    for (auto& [d, dek] : k.deks_) out.emplace_back(reinterpret_cast<const char*>(dek.key.data()), dek.key.size());
    return out;
  }
};
}  // namespace loom::auditchain

namespace {

const sys_time t0 = std::chrono::sys_days{std::chrono::year{2024} / 1 / 1};

row_context ctx(std::uint64_t seq) {
  static const std::string source = "scheduler@edge";
  static const std::string req = "req-fixed";
  return row_context{.seq = seq, .source = source, .source_seq = seq + 100, .request_id = req};
}

std::unique_ptr<keyring> open_ring(const std::string& dir, sys_time now, keyring_options o = {}) {
  auto k = keyring::open(dir, std::move(o), now);
  REQUIRE_MESSAGE(k.ok(), k.err().to_string());
  return std::move(*k);
}

std::string seal(keyring& k, std::string_view pt, std::uint64_t seq, sys_time now) {
  auto s = k.seal(pt, ctx(seq), now);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  return *s;
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::map<std::string, std::string> dir_contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out[e.path().filename().string()] = *loom::files::read_file(e.path().string());
  return out;
}

}  // namespace

TEST_CASE("payloads seal under the day key and open only for their own row") {
  loom::files::temp_dir dir("auditchain");
  auto k = open_ring(dir.path() + "/keys", t0 + 5h);
  CHECK(k->current_kek_version() == 1);
  std::string sealed = seal(*k, "job.submit by alice", 7, t0 + 5h);
  auto h = parse_header(sealed);
  REQUIRE(h.ok());
  CHECK(h->day == day_of(t0));
  CHECK(h->kek_version == 1);
  CHECK(day_name(h->day) == "2024-01-01");
  auto pt = k->unseal(sealed, ctx(7));
  REQUIRE(pt.ok());
  CHECK(*pt == "job.submit by alice");
  auto moved = k->unseal(sealed, ctx(8));
  CHECK(moved.code() == errc::corruption);
  CHECK(moved.err().message.find("authentication failed") != std::string::npos);
  row_context other_req = ctx(7);
  other_req.request_id = "req-other";
  CHECK(k->unseal(sealed, other_req).code() == errc::corruption);

  const std::string keys = dir.path() + "/keys";
  CHECK(mode_of(keys) == 0700);
  CHECK(mode_of(keys + "/kek-000001.key") == 0600);
  CHECK(mode_of(keys + "/dek-" + std::to_string(day_of(t0)) + ".key") == 0600);
}

TEST_CASE("every flipped bit of a keyring-sealed payload fails, whatever header field it hits") {
  loom::files::temp_dir dir("auditchain");
  auto k = open_ring(dir.path(), t0);
  // Keys for neighbouring days exist too, so a flipped day bit may find a real key.
  for (int d = 0; d < 8; ++d) (void)seal(*k, "x", 1, t0 + std::chrono::days(d));
  (void)k->rotate(t0 + 1h);
  const std::string sealed = seal(*k, "payload under test: 32 bytes...", 3, t0 + 2h);
  std::size_t refused = 0;
  for (std::size_t bit = 0; bit < sealed.size() * 8; ++bit) {
    std::string t = sealed;
    t[bit / 8] = static_cast<char>(t[bit / 8] ^ (1 << (bit % 8)));
    auto r = k->unseal(t, ctx(3));
    refused += !r.ok() && r.code() == errc::corruption;
  }
  CHECK(refused == sealed.size() * 8);
  CHECK(k->unseal(sealed, ctx(3)).ok());
}

TEST_CASE("the KEK rotates on day 30 of the injected clock, old data stays readable and nothing is rewritten") {
  loom::files::temp_dir dir("auditchain");
  std::vector<std::pair<std::uint32_t, bool>> rotations;
  keyring_options o;
  o.on_rotate = [&](std::uint32_t v, bool scheduled) { rotations.emplace_back(v, scheduled); };
  auto k = open_ring(dir.path(), t0, o);
  std::vector<std::string> sealed;
  for (int d = 0; d < 30; ++d) {
    sealed.push_back(seal(*k, "day " + std::to_string(d), static_cast<std::uint64_t>(d + 1), t0 + std::chrono::days(d) + 3h));
    CHECK(parse_header(sealed.back())->kek_version == 1);
  }
  CHECK(k->current_kek_version() == 1);
  const auto before = dir_contents(dir.path());
  CHECK(before.size() == 31);  // kek v1 + 30 day keys

  sealed.push_back(seal(*k, "day 30", 31, t0 + std::chrono::days(30) + 1min));
  CHECK(parse_header(sealed.back())->kek_version == 2);
  CHECK(k->current_kek_version() == 2);
  REQUIRE(rotations.size() == 2);  // v1 at creation, v2 on day 30
  CHECK(rotations[1] == std::make_pair(2u, true));

  const auto after = dir_contents(dir.path());
  for (const auto& [name, bytes] : before) CHECK_MESSAGE(after.at(name) == bytes, name << " was rewritten");
  CHECK(after.size() == before.size() + 2);  // kek v2 and the day-30 key
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    auto pt = k->unseal(sealed[i], ctx(i + 1));
    REQUIRE_MESSAGE(pt.ok(), pt.err().to_string());
    CHECK(*pt == "day " + std::to_string(i));
  }

  // Explicit rotation: new days use v3; the day-30 key keeps v2.
  auto v3 = k->rotate(t0 + std::chrono::days(30) + 2h);
  REQUIRE(v3.ok());
  CHECK(*v3 == 3);
  CHECK(rotations.back() == std::make_pair(3u, false));
  CHECK(parse_header(seal(*k, "later on day 30", 40, t0 + std::chrono::days(30) + 3h))->kek_version == 2);
  CHECK(parse_header(seal(*k, "day 31", 41, t0 + std::chrono::days(31)))->kek_version == 3);
  // No scheduled rotation before v3 is 30 days old.
  CHECK(k->rotate_if_due(t0 + std::chrono::days(59))->has_value() == false);
  CHECK(k->rotate_if_due(t0 + std::chrono::days(61))->value() == 4);

  // A reader (the CLI) opening the same directory reads everything.
  keyring_options ro;
  ro.create = false;
  auto reader = open_ring(dir.path(), t0 + std::chrono::days(90), ro);
  for (std::size_t i = 0; i < sealed.size(); ++i) CHECK(reader->unseal(sealed[i], ctx(i + 1)).ok());
  auto days = reader->day_keys();
  REQUIRE(days.ok());
  CHECK(days->size() == 32);
  CHECK(days->front().kek_version == 1);
  CHECK(days->back().kek_version == 3);
}

TEST_CASE("no nonce repeats over a million encryptions under one day key") {
  loom::files::temp_dir dir("auditchain");
  auto k = open_ring(dir.path(), t0);
  constexpr std::size_t n = 1'000'000;
  std::vector<std::array<std::uint8_t, nonce_size>> nonces;
  nonces.reserve(n);
  const std::string pt(64, 'p');
  for (std::size_t i = 0; i < n; ++i) {
    auto s = k->seal(pt, ctx(i + 1), t0 + 1h);
    REQUIRE(s.ok());
    nonces.push_back(parse_header(*s)->nonce);
  }
  std::sort(nonces.begin(), nonces.end());
  CHECK(std::adjacent_find(nonces.begin(), nonces.end()) == nonces.end());
  CHECK(k->day_keys()->size() == 1);
}

TEST_CASE("purge refuses day keys younger than the retention and crypto-shreds older ones") {
  loom::files::temp_dir dir("auditchain");
  auto k = open_ring(dir.path(), t0);
  const std::uint32_t d0 = day_of(t0);
  const std::string s0 = seal(*k, "day 0 secret", 1, t0 + 1h);
  const std::string s1 = seal(*k, "day 1 secret", 2, t0 + std::chrono::days(1));
  const std::string s100 = seal(*k, "day 100 secret", 3, t0 + std::chrono::days(100));

  auto young = k->purge(d0, t0 + std::chrono::days(150));
  CHECK(young.code() == loom::errc::invalid_argument);
  CHECK(young.err().message.find("retention of 180 days") != std::string::npos);
  CHECK(young.err().message.find("may be purged from 2024-06-30") != std::string::npos);
  CHECK(k->purge(d0, t0 + std::chrono::days(180) + 23h).code() == errc::invalid_argument);  // the boundary
  CHECK(k->purge(d0 + 500, t0 + std::chrono::days(181)).code() == errc::invalid_argument);  // future day
  CHECK(k->unseal(s0, ctx(1)).ok());

  // Another process holds day 0's key in memory when the purge happens.
  keyring_options ro;
  ro.create = false;
  auto other = open_ring(dir.path(), t0, ro);
  REQUIRE(other->unseal(s0, ctx(1)).ok());

  REQUIRE(k->purge(d0, t0 + std::chrono::days(181)).ok());
  const std::string key_file = dir.path() + "/dek-" + std::to_string(d0) + ".key";
  CHECK_FALSE(std::filesystem::exists(key_file));
  CHECK(std::filesystem::exists(dir.path() + "/dek-" + std::to_string(d0) + ".destroyed"));
  for (keyring* ring : {k.get(), other.get()}) {
    auto gone = ring->unseal(s0, ctx(1));
    CHECK(gone.code() == errc::not_found);
    CHECK(gone.err().message.find("key destroyed") != std::string::npos);
    CHECK(gone.err().message.find("2024-01-01") != std::string::npos);
    CHECK(ring->unseal(s1, ctx(2)).ok());
  }
  CHECK(k->purge(d0, t0 + std::chrono::days(182)).ok());  // idempotent
  CHECK(k->purge(d0 + 2, t0 + std::chrono::days(400)).code() == errc::not_found);

  auto expired = k->purge_expired(t0 + std::chrono::days(400));
  REQUIRE(expired.ok());
  CHECK(*expired == std::vector<std::uint32_t>{d0 + 1, d0 + 100});
  CHECK(k->unseal(s100, ctx(3)).code() == errc::not_found);
  CHECK(k->purge_expired(t0 + std::chrono::days(401))->empty());
}

TEST_CASE("keyring settings and key files are checked") {
  loom::files::temp_dir dir("auditchain");
  keyring_options short_retention;
  short_retention.retention = std::chrono::days(30);
  CHECK(keyring::open(dir.path(), short_retention, t0).code() == errc::invalid_argument);
  keyring_options ro;
  ro.create = false;
  CHECK(keyring::open(dir.path() + "/missing", ro, t0).code() == errc::not_found);
  { auto k = open_ring(dir.path(), t0); }
  ::chmod((dir.path() + "/kek-000001.key").c_str(), 0640);
  auto loose = keyring::open(dir.path(), {}, t0);
  CHECK(loose.code() == errc::permission_denied);
  CHECK(loose.err().message.find("kek-000001.key") != std::string::npos);
}

TEST_CASE("canary: no key ever appears in a sealed payload, plain or hex") {
  loom::files::temp_dir dir("auditchain");
  auto k = open_ring(dir.path(), t0);
  const std::string canary = "CANARY-token-7f3a9c";
  std::vector<std::string> sealed;
  for (int i = 0; i < 200; ++i)
    sealed.push_back(seal(*k, canary + std::to_string(i), static_cast<std::uint64_t>(i + 1),
                          t0 + std::chrono::days(i % 3)));
  (void)k->rotate(t0 + std::chrono::days(3));
  sealed.push_back(seal(*k, canary, 999, t0 + std::chrono::days(4)));
  auto keys = loom::auditchain::keyring_test_access::raw_keys(*k);
  CHECK(keys.size() == 2 + 4);  // two KEKs, four day keys
  for (const auto& s : sealed) {
    CHECK(s.find(canary) == std::string::npos);
    for (const auto& key : keys) {
      CHECK(s.find(key) == std::string::npos);
      CHECK(s.find(loom::crypto::to_hex(key)) == std::string::npos);
    }
  }
}

TEST_CASE("a key file is never overwritten: a second create is already_exists and a missing one is not_found") {
  loom::files::temp_dir dir("loom-key-files");
  const std::string path = dir.path() + "/k.key";
  REQUIRE(loom::files::secret::create_exclusive(path, "first").ok());
  auto again = loom::files::secret::create_exclusive(path, "second");
  CHECK(again.code() == errc::already_exists);
  CHECK(again.err().message.find(path) != std::string::npos);
  CHECK(*loom::files::secret::read_private(path) == "first");
  auto missing = loom::files::secret::read_private(dir.path() + "/none.key");
  CHECK(missing.code() == errc::not_found);
  CHECK(missing.err().message.find("No such file") != std::string::npos);
  CHECK(loom::files::secret::shred(dir.path() + "/none.key").code() == errc::not_found);
}
