#include "libs/pii/detectors.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom::pii;

namespace {
using v = std::vector<std::string>;
v found(void (*fn)(std::string_view, std::vector<span>&), std::string_view text) {
  std::vector<span> s;
  fn(text, s);
  v out;
  for (const auto& x : s) out.emplace_back(text.substr(x.start, x.end - x.start));
  return out;
}
v ipv4(std::string_view t) { return found(detail::find_ipv4, t); }
v ipv6(std::string_view t) { return found(detail::find_ipv6, t); }
}  // namespace

TEST_CASE("IPv4 dotted quads are found with ports, prefixes and sentence ends outside the span") {
  CHECK(ipv4("host 192.168.0.1 is up") == v{"192.168.0.1"});
  CHECK(ipv4("10.0.0.255:8080, 0.0.0.0/0 and 8.8.8.8.") == v{"10.0.0.255", "0.0.0.0", "8.8.8.8"});
  CHECK(ipv4("ip=255.255.255.255;") == v{"255.255.255.255"});
  CHECK(ipv4("\xff" "1.2.3.4" "\x80") == v{"1.2.3.4"});
}

TEST_CASE("IPv4 near misses are not flagged") {
  for (const char* bad : {"256.1.2.3", "1.2.3", "1.2.3.4.5", "01.2.3.4", "192.168.1.300", "v1.2.3.4", "10.0.0",
                          "a1.2.3.4", "1.2.3.4a", "version 4.1.2.7", "Version 1.0.0.1", "1.2.3.4.txt", "1..2.3.4"}) {
    CAPTURE(bad);
    CHECK(ipv4(bad).empty());
  }
}

TEST_CASE("every RFC 4291 text form of IPv6 is valid") {
  for (const char* ok : {"2001:db8:0:0:8:800:200c:417a", "2001:DB8::8:800:200C:417A", "ff01::101", "::1", "::",
                         "1::", "2001:db8::", "0:0:0:0:0:0:13.1.68.3", "::13.1.68.3", "0:0:0:0:0:ffff:129.144.52.38",
                         "::ffff:129.144.52.38", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6::8",
                         "fe80::1:2"}) {
    CAPTURE(ok);
    CHECK(detail::ipv6_ok(ok));
  }
  for (const char* bad : {"1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9", "2001:db8:::1", "1::2::3", "12345::1", "::g",
                          ":1:2:3:4:5:6:7", "1:2:3:4:5:6:7:", "::ffff:1.2.3.256", "1:2:3:4:5:6:7:1.2.3.4",
                          "1.2.3.4::", "12:30", "12:30:45"}) {
    CAPTURE(bad);
    CHECK_FALSE(detail::ipv6_ok(bad));
  }
}

TEST_CASE("IPv6 addresses are found in brackets, with zones and prefixes, not in times, MACs or code") {
  CHECK(ipv6("connect to [2001:db8::1]:443 now") == v{"2001:db8::1"});
  CHECK(ipv6("fe80::1%eth0 and 2001:db8::/32.") == v{"fe80::1", "2001:db8::"});
  CHECK(ipv6("addr:fe80::a:1 then ::ffff:10.0.0.1") == v{"fe80::a:1", "::ffff:10.0.0.1"});
  CHECK(ipv6("at 2001:db8:0:0:1:0:0:1: the end") == v{"2001:db8:0:0:1:0:0:1"});
  CHECK(ipv6("loopback ::1.") == v{"::1"});
  for (const char* bad : {"at 12:30 or 12:30:45", "mac 00:1a:2b:3c:4d:5e", "std::vector", "x ::add(y)",
                          "dead::beef", "sha256:abcd", "a :: b", "Foo::Bar::1", "2001:db8::1x"}) {
    CAPTURE(bad);
    CHECK(ipv6(bad).empty());
  }
}
