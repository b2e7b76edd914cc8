#include "services/audit/event_store.hpp"

#include "loom/v1/audit.pb.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

using loom::audit_service::event_store;

namespace {
std::string temp_dir() {
  char tmpl[] = "/tmp/loom-audit-store-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  return tmpl;
}
std::string ev(const std::string& source, std::uint64_t seq, const std::string& rid = "") {
  loom::v1::AuditEvent e;
  e.set_source(source);
  e.set_source_seq(seq);
  e.set_action("loom.v1.RegisterNodeRequest");
  e.set_request_id(rid);
  return e.SerializeAsString();
}
}  // namespace

TEST_CASE("events are stored once per source, in order; duplicates and gaps are refused") {
  auto dir = temp_dir();
  auto s = event_store::open(dir);
  REQUIRE(s.ok());
  auto& st = **s;
  CHECK(st.append(ev("a", 1)) == event_store::outcome::stored);
  CHECK(st.append(ev("a", 1)) == event_store::outcome::duplicate);
  CHECK(st.append(ev("a", 3)) == event_store::outcome::gap);
  CHECK(st.append(ev("b", 1)) == event_store::outcome::stored);
  CHECK(st.append("garbage") == event_store::outcome::invalid);
  CHECK(st.watermark("a") == 0);  // not durable yet
  REQUIRE(st.sync().ok());
  CHECK(st.watermark("a") == 1);
  CHECK(st.total() == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a reopened log keeps its events and cuts only a torn tail") {
  auto dir = temp_dir();
  {
    auto s = event_store::open(dir);
    REQUIRE(s.ok());
    for (std::uint64_t i = 1; i <= 100; ++i) CHECK((*s)->append(ev("a", i, "r" + std::to_string(i))) == event_store::outcome::stored);
    REQUIRE((*s)->sync().ok());
  }
  {
    std::ofstream f(dir + "/events.log", std::ios::app | std::ios::binary);
    f << std::string("\x00\x00\x01\x00\x12\x34", 6);  // half a header and body: a torn write
  }
  auto s = event_store::open(dir);
  REQUIRE(s.ok());
  CHECK((*s)->total() == 100);
  CHECK((*s)->watermark("a") == 100);
  CHECK((*s)->append(ev("a", 101)) == event_store::outcome::stored);
  auto found = (*s)->scan("", 0, "r42", 0);
  REQUIRE(found.ok());
  CHECK(found->size() == 1);
  auto after = (*s)->scan("a", 90, "", 0);
  REQUIRE(after.ok());
  CHECK(after->size() == 10);  // 101 not yet durable
  std::filesystem::remove_all(dir);
}

TEST_CASE("a damaged record in the middle of the log is corruption, not silently dropped") {
  auto dir = temp_dir();
  {
    auto s = event_store::open(dir);
    REQUIRE(s.ok());
    for (std::uint64_t i = 1; i <= 10; ++i) (void)(*s)->append(ev("a", i));
    REQUIRE((*s)->sync().ok());
  }
  {
    std::fstream f(dir + "/events.log", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  auto s = event_store::open(dir);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == loom::errc::corruption);
  CHECK(s.err().message.find("events.log") != std::string::npos);
  std::filesystem::remove_all(dir);
}
