#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace loom::crypto;

TEST_CASE("sha256 and hmac match the published test vectors") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(to_hex(as_view(hmac_sha256("Jefe", "what do ya want for nothing?"))) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("streamed sha256 equals one-shot sha256 whatever the split") {
  std::string data(100000, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + 7);
  for (std::size_t step : {1u, 63u, 64u, 4096u, 99999u}) {
    sha256_stream s;
    for (std::size_t i = 0; i < data.size(); i += step) s.update(std::string_view(data).substr(i, step));
    CHECK(s.finish() == sha256(data));
  }
}

TEST_CASE("hex and base64url round-trip every byte length and reject junk") {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t n = 0; n < 40; ++n) {
    auto s = all.substr(n, n);
    CHECK(*from_hex(to_hex(s)) == s);
    auto d = base64url_decode(base64url_encode(s));
    REQUIRE(d.ok());
    CHECK(*d == s);
  }
  CHECK(base64url_encode("\xfb\xff") == "-_8");
  CHECK_FALSE(from_hex("abc").ok());
  CHECK_FALSE(from_hex("zz").ok());
  CHECK_FALSE(base64url_decode("ab=c").ok());
  CHECK_FALSE(base64url_decode("a").ok());
  CHECK_FALSE(base64url_decode("-_9").ok());  // non-zero trailing bits
}

TEST_CASE("constant-time comparison and random bytes behave") {
  CHECK(constant_time_equal("abc", "abc"));
  CHECK_FALSE(constant_time_equal("abc", "abd"));
  CHECK_FALSE(constant_time_equal("abc", "ab"));
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) seen.insert(random_bytes(16));
  CHECK(seen.size() == 100);
  CHECK(random_bytes(0).empty());
}
