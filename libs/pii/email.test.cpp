#include "libs/pii/detectors.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom::pii;

namespace {
std::vector<std::string> emails(std::string_view text) {
  std::vector<span> s;
  detail::find_emails(text, s);
  std::vector<std::string> out;
  for (const auto& x : s) {
    CHECK(x.type == pii_type::email);
    out.emplace_back(text.substr(x.start, x.end - x.start));
  }
  return out;
}
using v = std::vector<std::string>;
}  // namespace

TEST_CASE("e-mail addresses are found with exact byte spans in their usual contexts") {
  CHECK(emails("write to jane.doe@example.com today") == v{"jane.doe@example.com"});
  CHECK(emails("<Jane_Doe+tag@mail.example.co.uk>") == v{"Jane_Doe+tag@mail.example.co.uk"});
  CHECK(emails("mailto:x%y@ex-ample.org.") == v{"x%y@ex-ample.org"});
  CHECK(emails("a@b.io,c@d.de;\"e@f.museum\"") == v{"a@b.io", "c@d.de", "e@f.museum"});
  CHECK(emails("...dots@example.net") == v{"dots@example.net"});
  CHECK(emails("punycode user@xn--bcher-kva.xn--p1ai") == v{"user@xn--bcher-kva.xn--p1ai"});
}

TEST_CASE("malformed e-mail addresses are not flagged") {
  for (const char* bad : {"john.doe@example", "john..doe@example.com", "john.doe@@example.com", "john.@example.com",
                          "john@example..com", "john@-example.com", "john@example-.com", "john@example.c",
                          "john@exam_ple.com", "@example.com", "john@", "john @ example.com", "john@example.123",
                          "icon@2x.png", "a@b@c.com", "name@host.com_x"}) {
    CAPTURE(bad);
    CHECK(emails(bad).empty());
  }
}

TEST_CASE("e-mail limits: 64-byte local part, 63-byte labels, raw non-UTF-8 neighbours") {
  const std::string local64(64, 'a'), local65(65, 'a'), label63(63, 'b'), label64(64, 'b');
  CHECK(emails(local64 + "@x.com") == v{local64 + "@x.com"});
  CHECK(emails(local65 + "@x.com").empty());
  CHECK(emails("u@" + label63 + ".com") == v{"u@" + label63 + ".com"});
  CHECK(emails("u@" + label64 + ".com").empty());
  // Bytes >= 0x80 are boundaries, valid UTF-8 or not.
  CHECK(emails("\xff\xfeu@x.com\x80\xc3") == v{"u@x.com"});
  CHECK(emails("\xc2\xab" "u@x.com" "\xc2\xbb") == v{"u@x.com"});
}
