#include "libs/atrest/ephemeral.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::atrest;

TEST_CASE("an ephemeral key's records open back to back, and hide what they hold") {
  ephemeral_key k("spool");
  const std::string a = "the first piece of a delta", b(70000, 'x');
  const std::string file = k.seal(a, 0) + k.seal("", 1) + k.seal(b, 2);
  CHECK(file.size() == a.size() + b.size() + 3 * ephemeral_key::overhead);
  CHECK(file.find("first piece") == std::string::npos);
  CHECK(file.find(std::string(64, 'x')) == std::string::npos);
  auto back = k.open_all(file, "upload-1.part");
  REQUIRE_MESSAGE(back.ok(), back.err().to_string());
  CHECK(*back == a + b);
  CHECK(k.open_all("", "empty")->empty());
  std::string in_place = file;
  REQUIRE(k.open_in_place(in_place, "upload-1.part").ok());
  CHECK(in_place == a + b);
}

TEST_CASE("a flipped bit, a record cut short, moved, dropped or sealed by another key is refused naming it") {
  ephemeral_key k("spool"), other("spool");
  const std::string r0 = k.seal("alpha", 0), r1 = k.seal("beta", 1);
  auto refused = [&](const std::string& file, const std::string& needle) {
    auto r = k.open_all(file, "upload-3.part");
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::corruption);
    CHECK(r.err().message.find("upload-3.part") != std::string::npos);
    CHECK_MESSAGE(r.err().message.find(needle) != std::string::npos, r.err().message);
  };
  std::string flipped = r0 + r1;
  flipped[r0.size() + 20] ^= 1;
  refused(flipped, "record 1 at byte " + std::to_string(r0.size()));
  refused((r0 + r1).substr(0, r0.size() + r1.size() - 1), "cut short");
  refused(r1 + r0, "record 0 at byte 0");  // swapped
  refused(r1, "record 0");                 // the first dropped
  refused(other.seal("alpha", 0), "does not authenticate");
  ephemeral_key labelled("another spool");
  auto r = labelled.open_all(k.seal("alpha", 0), "x");
  CHECK_FALSE(r.ok());
}
