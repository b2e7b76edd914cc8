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
v cards(std::string_view t) { return found(detail::find_cards, t); }
v ibans(std::string_view t) { return found(detail::find_ibans, t); }
v ssns(std::string_view t) { return found(detail::find_ssns, t); }
}  // namespace

TEST_CASE("Luhn and issuer prefixes accept the networks' published test numbers") {
  for (const char* d : {"4111111111111111", "4222222222222", "5500005555555559", "2223003122003222", "378282246310005",
                        "371449635398431", "6011111111111117", "3530111333300000", "30569309025904",
                        "6759649826438453", "4012888888881881"}) {
    CAPTURE(d);
    CHECK(detail::luhn_ok(d));
    CHECK(detail::card_prefix_ok(d));
  }
  CHECK_FALSE(detail::luhn_ok("4111111111111112"));
  CHECK_FALSE(detail::card_prefix_ok("1111111111111117"));  // no network starts with 1
  CHECK_FALSE(detail::card_prefix_ok("378282246310005000"));  // Amex is 15 digits
  CHECK_FALSE(detail::card_prefix_ok("5500005555555"));      // Mastercard is 16
}

TEST_CASE("card numbers are found unbroken, spaced or dashed, and inside longer digit runs") {
  CHECK(cards("card 4111111111111111 exp") == v{"4111111111111111"});
  CHECK(cards("4111 1111 1111 1111.") == v{"4111 1111 1111 1111"});
  CHECK(cards("Amex 3782-822463-10005, ok") == v{"3782-822463-10005"});
  CHECK(cards("paid in 2019 4111 1111 1111 1111 2027") == v{"4111 1111 1111 1111"});
  CHECK(cards("4111111111111111 5 times") == v{"4111111111111111"});
  CHECK(cards("Copyright 1985, 3056 930902 5904 1986, 1988") == v{"3056 930902 5904"});
  CHECK(cards("version 3 3530-1113-3330-0000.") == v{"3530-1113-3330-0000"});
  CHECK(cards("\xfe" "5500005555555559" "\xff") == v{"5500005555555559"});
}

TEST_CASE("card near misses are not flagged") {
  for (const char* bad : {"4111111111111112", "4111 1111 1111 1112", "1111111111111117", "411111111111",
                          "41111111111111111111", "4111-1111 1111-1111", "4111  1111  1111  1111", "x4111111111111111",
                          "4111111111111111x", "3.4111111111111111", "4111111111111111.5", "0000 0000 0000 0000",
                          "978-3-16-148410-0",
                          "6759 6498 2643 8453 004"}) {  // 19 digits failing Luhn: its valid 16-digit prefix is no card
    CAPTURE(bad);
    CHECK(cards(bad).empty());
  }
}

TEST_CASE("IBANs pass mod 97 in compact and grouped form, with the registry length") {
  for (const char* ok : {"DE89370400440532013000", "GB82WEST12345698765432", "FR1420041010050500013M02606",
                         "NL91ABNA0417164300", "BE68539007547034", "CH9300762011623852957", "NO9386011117947",
                         "MT84MALT011000012345MTLCAST001S", "ES9121000418450200051332",
                         "IT60X0542811101000000123456"}) {
    CAPTURE(ok);
    CHECK(detail::iban_ok(ok));
    CHECK(ibans(std::string("IBAN: ") + ok + ".") == v{ok});
  }
  CHECK(ibans("pay DE89 3704 0044 0532 0130 00 today") == v{"DE89 3704 0044 0532 0130 00"});
  CHECK(ibans("GB82 WEST 1234 5698 7654 32, thanks") == v{"GB82 WEST 1234 5698 7654 32"});
}

TEST_CASE("IBAN near misses are not flagged") {
  for (const char* bad : {"DE88370400440532013000", "DE8937040044053201300", "DE893704004405320130001",
                          "XX89370400440532013000", "de89370400440532013000", "DE89 3704 0044 0532 0130 0",
                          "DE89 37040044 0532 0130 00", "xDE89370400440532013000", "DE89370400440532013000x"}) {
    CAPTURE(bad);
    CHECK(ibans(bad).empty());
  }
}

TEST_CASE("SSNs need dashes and an issuable area, group and serial") {
  CHECK(ssns("SSN 123-45-6789.") == v{"123-45-6789"});
  CHECK(ssns("(665-01-0001) 899-99-9999") == v{"665-01-0001", "899-99-9999"});
  for (const char* bad : {"000-12-3456", "666-12-3456", "900-12-3456", "999-12-3456", "123-00-4567", "123-45-0000",
                          "078-05-1120", "219-09-9999", "123456789", "123 45 6789", "123-45-67890", "1123-45-6789",
                          "123-456-789", "12-345-6789", "555-123-45-6789", "123-45-6789-1", "a123-45-6789"}) {
    CAPTURE(bad);
    CHECK(ssns(bad).empty());
  }
}
