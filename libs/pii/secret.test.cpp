// Token-shaped strings are assembled at run time ("gh" + "p_" + ...) so that
// secret scanners run on this repository do not flag the test itself.
#include "libs/pii/detectors.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

using namespace loom::pii;

namespace {
using v = std::vector<std::string>;

struct found_secrets {
  v known, entropic;
};
found_secrets secrets(std::string_view text, const options& o = {}) {
  std::vector<span> k, e;
  detail::find_secrets(text, o, k, e);
  found_secrets f;
  for (const auto& x : k) f.known.emplace_back(text.substr(x.start, x.end - x.start));
  for (const auto& x : e) f.entropic.emplace_back(text.substr(x.start, x.end - x.start));
  return f;
}

std::string random_chars(std::mt19937_64& rng, std::string_view alphabet, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}
constexpr std::string_view base62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
}  // namespace

TEST_CASE("secrets in known formats are found whole") {
  std::mt19937_64 rng(7);
  const std::string aws = std::string("AK") + "IA" + "IOSFODNN7EXAMPLE";
  const std::string gh = std::string("gh") + "p_" + random_chars(rng, base62, 36);
  const std::string pat = std::string("github") + "_pat_" + random_chars(rng, base62, 22) + "_" +
                          random_chars(rng, base62, 59);
  const std::string slack = std::string("xo") + "xb-" + "123456789012-1234567890123-" + random_chars(rng, base62, 24);
  const std::string stripe = std::string("sk") + "_live_" + random_chars(rng, base62, 24);
  const std::string google = std::string("AI") + "za" + random_chars(rng, base62, 35);
  const std::string npm = std::string("np") + "m_" + random_chars(rng, base62, 36);
  const std::string jwt = std::string("ey") + "JhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.ey" +
                          "JzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ." +
                          "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
  for (const std::string& s : {aws, gh, pat, slack, stripe, google, npm, jwt}) {
    CAPTURE(s);
    CHECK(secrets("key=" + s + "; next").known == v{s});
    CHECK(secrets("\"" + s + "\"").known == v{s});
  }
}

TEST_CASE("a private key PEM block is one span, with or without its END line") {
  const std::string begin = std::string("-----BEGIN ") + "RSA PRIVATE KEY-----";
  const std::string body = "\nMIIEowIBAAKCAQEAx8a9YH2oJ2/uZq1gQy+u0pE\nq9RsS1Jc2Q==\n";
  const std::string whole = begin + body + "-----END RSA PRIVATE KEY-----";
  CHECK(secrets("before\n" + whole + "\nafter").known == v{whole});
  const std::string cut = begin + "\nMIIEowIBAAKCAQEAx8a9YH2oJ2/uZq1gQy+u0pE\nq9RsS1Jc2Q==";
  CHECK(secrets(cut + "\n\nplain text").known == v{cut});
  CHECK(secrets(std::string("-----BEGIN ") + "CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----").known.empty());
}

TEST_CASE("near misses of known formats are not known secrets") {
  for (const std::string& bad : {std::string("AK") + "IA1234", std::string("AK") + "IAIOSFODNN7EXAMPLEX",
                                 std::string("AK") + "IAIOSFODNN7EXAMPLe", std::string("gh") + "p_short",
                                 std::string("sk") + "_live_abc", std::string("xAK") + "IAIOSFODNN7EXAMPLE",
                                 std::string("ey") + "Jshort.eyJshort.sig", std::string("sk") + "-learn"}) {
    CAPTURE(bad);
    CHECK(secrets(bad).known.empty());
  }
}

TEST_CASE("the entropy rule flags random keys and not words, identifiers, hashes or paths") {
  std::mt19937_64 rng(11);
  int hits = 0;
  for (int i = 0; i < 1000; ++i) hits += secrets(" " + random_chars(rng, base62, 40) + " ").entropic.size() == 1;
  CHECK(hits >= 990);
  const std::string b64 = random_chars(rng, std::string(base62) + "+/", 40) + "==";
  CHECK(secrets("secret: " + b64 + "\n").entropic == v{b64});
  const std::string slash_first = "/kXBu5zn1aLtNaGilItbsPobTHTGoiHBPKWqZt4f";  // base64 may begin with '/'
  CHECK(secrets("(" + slash_first + ")").entropic == v{slash_first});
  for (const char* bad : {"ThisIsAVeryLongCamelCaseIdentifier123", "getElementsByTagNameNS2Foo",
                          "x86_64-linux-gnu-gcc-12-Base", "da39a3ee5e6b4b0d3255bfef95601890afd80709",
                          "550e8400-e29b-41d4-a716-446655440000", "/usr/lib/x86_64-linux-gnu/libQt5Core.so.5",
                          "see ../Src/Lib2/Foo3/Bar4/Baz5/x.c", "internationalization-localization",
                          "cpan/Compress-Raw-Bzip2/bzip2-src/README", "cpan/CPAN-Meta/lib/CPAN/Meta/History/Meta_1_0",
                          "https://Example.com/A1b2C3d4E5f6G7h8I9j0KlMnOpQr"}) {
    CAPTURE(bad);
    CHECK(secrets(bad).entropic.empty());
  }
  CHECK(secrets("aB3dE5gH7jK9mN1pQ3sT5vW7xY").entropic.size() == 1);  // 26 distinct characters
  options strict;
  strict.entropy_bits = 6.0;  // above log2(40): nothing of 40 characters can pass
  CHECK(secrets(random_chars(rng, base62, 40), strict).entropic.empty());
}
