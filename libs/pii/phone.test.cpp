#include "libs/pii/detectors.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom::pii;

namespace {
using v = std::vector<std::string>;
v phones(std::string_view text, const std::string& region = "US") {
  const auto plan = detail::make_phone_plan(region);
  REQUIRE(plan.has_value());
  std::vector<span> s;
  detail::find_phones(text, *plan, {}, s);
  v out;
  for (const auto& x : s) out.emplace_back(text.substr(x.start, x.end - x.start));
  return out;
}
}  // namespace

TEST_CASE("phone numbers in national and international formats are found for the default region") {
  CHECK(phones("Call (650) 253-0000 today.") == v{"(650) 253-0000"});
  CHECK(phones("or 650-253-0000, 650.253.0000 and +1 650 253 0000") ==
        v{"650-253-0000", "650.253.0000", "+1 650 253 0000"});
  CHECK(phones("London +44 20 7031 3000; Berlin +49 30 901820.") == v{"+44 20 7031 3000", "+49 30 901820"});
  CHECK(phones("tel:+16502530000\xff") == v{"+16502530000"});
}

TEST_CASE("the default region decides how national numbers are read") {
  CHECK(phones("020 7031 3000", "GB") == v{"020 7031 3000"});
  CHECK(phones("020 7031 3000", "US").empty());
  CHECK(detail::make_phone_plan("DE").has_value());
  CHECK_FALSE(detail::make_phone_plan("XX").has_value());
  const auto us = detail::make_phone_plan("US");
  CHECK(us->national_lengths == 1u << 10);  // 7-digit US numbers are local only
  CHECK(us->national_prefix == "1");
}

TEST_CASE("a number in parentheses keeps them out of its span unless they hold the area code") {
  CHECK(phones("(+44 20 7031 3000) and (+1 650 253 0000)") == v{"+44 20 7031 3000", "+1 650 253 0000"});
  CHECK(phones("((650) 253-0000)") == v{"(650) 253-0000"});
}

TEST_CASE("dates and times next to a number are not part of it, and cost no libphonenumber call") {
  CHECK(phones("on 2024-05-01 650-253-0000 at 12:30") == v{"650-253-0000"});
  CHECK(phones("2024-03-15 12:34:56 GET").empty());
  CHECK(phones("12:24:06 10.0.154.78 GET").empty());
  std::string ones;
  for (int i = 0; i < 2000; ++i) ones += "1 ";
  CHECK(phones(ones).empty());
}

TEST_CASE("runs inside a claimed span are not handed to libphonenumber") {
  const auto plan = detail::make_phone_plan("US");
  std::vector<span> s;
  const std::string text = "x 650-253-0000 y";
  detail::find_phones(text, *plan, {span{pii_type::ssn, 2, 14}}, s);
  CHECK(s.empty());
  detail::find_phones(text, *plan, {span{pii_type::ssn, 0, 1}}, s);
  CHECK(s.size() == 1);
}

TEST_CASE("dates, versions, short and invalid numbers are not phones") {
  for (const char* bad : {"2024-05-01", "12:30:45", "version 1.2.3.4567", "555-0123", "+1 123-456-7890",
                          "(650) 253-0000abc", "x650-253-0000", "Boston, MA 02110-1301", "ISBN 978-3-16-148410-0",
                          "269.241.114.6", "192.168.100.200"}) {
    CAPTURE(bad);
    CHECK(phones(bad).empty());
  }
}
