#include "libs/audit/spool.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>

using loom::errc;
using loom::audit::spool;
using loom::audit::spool_options;
namespace fs = std::filesystem;

namespace {
std::string temp_dir() {
  char tmpl[] = "/tmp/loom-spool-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

// Fixed width, so every record has the same size on disk.
std::string event(std::uint64_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "{\"event\":%06llu,\"who\":\"alice\"}", static_cast<unsigned long long>(i));
  return buf;
}

std::unique_ptr<spool> open_ok(const std::string& dir, spool_options opt = {}) {
  auto s = spool::open(dir, opt);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  return std::move(s).value();
}

void append_n(spool& s, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    auto seq = s.append(event(s.last_seq() + 1));
    REQUIRE(seq.ok());
  }
}

std::vector<std::string> segment_files(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with("seg-")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Checks read_after(after) returns exactly first..last with the events appended.
void check_records(const spool& s, std::uint64_t after, std::uint64_t first, std::uint64_t last) {
  auto got = s.read_after(after, 1'000'000);
  REQUIRE(got.ok());
  REQUIRE(got->size() == last - first + 1);
  for (std::uint64_t i = 0; i < got->size(); ++i) {
    CHECK((*got)[i].first == first + i);
    CHECK((*got)[i].second == event(first + i));
  }
}

void flip_byte(const std::string& path, std::uintmax_t off) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(off));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(off));
  f.put(static_cast<char>(c ^ 0x10));
}

constexpr std::uintmax_t header_bytes = 20;
std::uintmax_t record_bytes(std::uint64_t i) { return header_bytes + event(i).size(); }
}  // namespace

TEST_CASE("a thousand appended records survive a reopen in order with seqs 1 to 1000") {
  auto dir = temp_dir() + "/spool";
  {
    auto s = open_ok(dir);
    CHECK(s->last_seq() == 0);
    for (std::uint64_t i = 1; i <= 1000; ++i) {
      auto seq = s->append(event(i));
      REQUIRE(seq.ok());
      CHECK(*seq == i);
    }
  }
  struct stat st{};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  auto s = open_ok(dir);
  CHECK(s->last_seq() == 1000);
  CHECK(s->pending() == 1000);
  check_records(*s, 0, 1, 1000);
  auto page = s->read_after(10, 5);
  REQUIRE(page.ok());
  REQUIRE(page->size() == 5);
  CHECK(page->front().first == 11);
  CHECK(page->back().first == 15);
  fs::remove_all(fs::path(dir).parent_path());
}

TEST_CASE("a confirmed watermark survives a reopen and appends continue after the last seq") {
  auto dir = temp_dir();
  {
    auto s = open_ok(dir);
    append_n(*s, 1000);
    REQUIRE(s->trim_through(600).ok());
    CHECK(s->confirmed_seq() == 600);
    CHECK(s->pending() == 400);
  }
  auto s = open_ok(dir);
  CHECK(s->confirmed_seq() == 600);
  CHECK(s->pending() == 400);
  check_records(*s, 600, 601, 1000);
  check_records(*s, 0, 601, 1000);  // confirmed records are never re-sent
  auto seq = s->append(event(1001));
  REQUIRE(seq.ok());
  CHECK(*seq == 1001);
  CHECK(s->trim_through(1002).code() == errc::invalid_argument);
  CHECK(s->trim_through(500).ok());  // already confirmed: a no-op
  CHECK(s->confirmed_seq() == 600);
  fs::remove_all(dir);
}

TEST_CASE("a batch is one group commit with consecutive seqs") {
  auto dir = temp_dir();
  {
    auto s = open_ok(dir);
    append_n(*s, 3);
    std::vector<std::string> batch{event(4), event(5), event(6), event(7)};
    auto first = s->append_batch(batch);
    REQUIRE(first.ok());
    CHECK(*first == 4);
    CHECK(s->last_seq() == 7);
    CHECK(s->append_batch({}).code() == errc::invalid_argument);
  }
  auto s = open_ok(dir);
  check_records(*s, 0, 1, 7);
  fs::remove_all(dir);
}

TEST_CASE("a torn tail cut short by a crash is dropped and its seq reused") {
  auto dir = temp_dir();
  { append_n(*open_ok(dir), 10); }
  auto seg = dir + "/" + segment_files(dir).at(0);
  auto full = fs::file_size(seg);
  for (std::uintmax_t cut : {1u, 3u, 25u}) {
    fs::resize_file(seg, full - cut);
    auto s = open_ok(dir);
    CHECK(s->last_seq() == 9);
    CHECK(fs::file_size(seg) == full - record_bytes(10));
    check_records(*s, 0, 1, 9);
    auto seq = s->append(event(10));
    REQUIRE(seq.ok());
    CHECK(*seq == 10);
    CHECK(fs::file_size(seg) == full);
  }
  fs::remove_all(dir);
}

TEST_CASE("garbage after the last record is dropped and no record is lost") {
  auto dir = temp_dir();
  { append_n(*open_ok(dir), 10); }
  auto seg = dir + "/" + segment_files(dir).at(0);
  auto full = fs::file_size(seg);
  std::uint32_t x = 12345;  // fixed-seed LCG: deterministic garbage
  for (std::size_t n : {1u, 7u, 20u, 37u, 500u}) {
    {
      std::ofstream f(seg, std::ios::app | std::ios::binary);
      for (std::size_t i = 0; i < n; ++i) f.put(static_cast<char>((x = x * 1103515245u + 12345u) >> 16));
    }
    auto s = open_ok(dir);
    CHECK(s->last_seq() == 10);
    CHECK(fs::file_size(seg) == full);
    check_records(*s, 0, 1, 10);
  }
  fs::remove_all(dir);
}

TEST_CASE("a flipped byte in a middle record is a corruption error naming the file") {
  auto dir = temp_dir();
  { append_n(*open_ok(dir), 10); }
  auto seg = dir + "/" + segment_files(dir).at(0);
  std::uintmax_t rec5 = 0;
  for (std::uint64_t i = 1; i < 5; ++i) rec5 += record_bytes(i);
  // Every field of record 5: magic, length, seq, checksum, payload.
  for (std::uintmax_t at : {0u, 5u, 7u, 15u, 18u, 20u, 30u}) {
    flip_byte(seg, rec5 + at);
    auto s = spool::open(dir);
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == errc::corruption);
    CHECK_MESSAGE(s.err().message.find(seg) != std::string::npos, s.err().message);
    CHECK_MESSAGE(s.err().message.find("offset " + std::to_string(rec5)) != std::string::npos, s.err().message);
    flip_byte(seg, rec5 + at);  // undo: the spool opens again
    REQUIRE(spool::open(dir).ok());
  }
  fs::remove_all(dir);
}

TEST_CASE("segments rotate at the size limit and trimming deletes only fully confirmed ones") {
  auto dir = temp_dir();
  const spool_options small{10 * record_bytes(50)};  // ten records per segment
  {
    auto s = open_ok(dir, small);
    append_n(*s, 100);
  }
  auto files = segment_files(dir);
  REQUIRE(files.size() == 10);
  CHECK(files.front() == "seg-00000000000000000001.log");
  CHECK(files.back() == "seg-00000000000000000091.log");
  {
    auto s = open_ok(dir, small);
    check_records(*s, 0, 1, 100);
    REQUIRE(s->trim_through(55).ok());  // 51..60 still holds 56..60
    files = segment_files(dir);
    REQUIRE(files.size() == 5);
    CHECK(files.front() == "seg-00000000000000000051.log");
    check_records(*s, 0, 56, 100);
  }
  auto s = open_ok(dir, small);
  CHECK(s->confirmed_seq() == 55);
  check_records(*s, 0, 56, 100);
  REQUIRE(s->trim_through(100).ok());
  CHECK(segment_files(dir) == std::vector<std::string>{"seg-00000000000000000091.log"});  // the one being written stays
  append_n(*s, 1);
  CHECK(s->last_seq() == 101);
  fs::remove_all(dir);
}

TEST_CASE("damage at the end of a segment that is not the last is corruption, not a torn tail") {
  auto dir = temp_dir();
  const spool_options small{10 * record_bytes(50)};
  { append_n(*open_ok(dir, small), 30); }
  auto first = dir + "/" + segment_files(dir).at(0);
  fs::resize_file(first, fs::file_size(first) - 2);
  auto s = spool::open(dir, small);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == errc::corruption);
  CHECK(s.err().message.find(first) != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a second process cannot open a spool that is in use") {
  auto dir = temp_dir();
  auto s = open_ok(dir);
  auto again = spool::open(dir);
  CHECK(again.code() == errc::unavailable);
  s.reset();
  CHECK(spool::open(dir).ok());
  fs::remove_all(dir);
}

TEST_CASE("each record on disk starts with magic, length and seq") {
  auto dir = temp_dir();
  { REQUIRE(open_ok(dir)->append("abc").ok()); }
  std::ifstream f(dir + "/" + segment_files(dir).at(0), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  REQUIRE(bytes.size() == header_bytes + 3);
  CHECK(bytes.substr(0, 4) == "LSP1");
  CHECK(bytes.substr(4, 4) == std::string("\0\0\0\3", 4));
  CHECK(bytes.substr(8, 8) == std::string("\0\0\0\0\0\0\0\1", 8));
  CHECK(bytes.substr(20) == "abc");
  fs::remove_all(dir);
}

TEST_CASE("a segment deleted under an open spool is not_found naming it, and one cut short is corruption") {
  auto dir = temp_dir();
  auto s = open_ok(dir);
  append_n(*s, 3);
  const std::string seg = dir + "/" + segment_files(dir).at(0);
  fs::resize_file(seg, record_bytes(1) + 5);
  auto cut = s->read_after(0, 10);
  CHECK(cut.code() == errc::corruption);
  CHECK(cut.err().message.find("shrank") != std::string::npos);
  fs::remove(seg);
  auto gone = s->read_after(0, 10);
  CHECK(gone.code() == errc::not_found);
  CHECK(gone.err().message == "open " + seg + ": No such file or directory");
  s.reset();
  fs::remove_all(dir);
}

TEST_CASE("a batch whose fdatasync fails is cut off and refused until the disk heals, then appended under the same seqs") {
  auto dir = temp_dir();
  auto faults = temp_dir();
  auto s = open_ok(dir);
  append_n(*s, 2);
  const std::string seg = dir + "/" + segment_files(dir).at(0);
  ::setenv("LOOM_FAULTS_DIR", faults.c_str(), 1);
  { std::ofstream(faults + "/fsync") << ""; }
  std::vector<std::string> batch{event(3), event(4)};
  auto failed = s->append_batch(batch);
  CHECK(failed.code() == errc::internal);
  CHECK(failed.err().message.find("fdatasync") != std::string::npos);
  // The cut could not be synced either: refused, naming why, and nothing of the batch stays.
  auto refused = s->append_batch(batch);
  CHECK(refused.code() == errc::unavailable);
  CHECK(refused.err().message.find("cut off again") != std::string::npos);
  CHECK(s->last_seq() == 2);
  CHECK(fs::file_size(seg) == record_bytes(1) * 2);
  fs::remove(faults + "/fsync");
  // Healed: the same batch goes in under seqs 3 and 4, and a reopen reads 1..4 once each.
  auto again = s->append_batch(batch);
  REQUIRE(again.ok());
  CHECK(*again == 3);
  ::unsetenv("LOOM_FAULTS_DIR");
  s.reset();
  auto back = open_ok(dir);
  CHECK(back->last_seq() == 4);
  check_records(*back, 0, 1, 4);
  back.reset();
  fs::remove_all(dir);
  fs::remove_all(faults);
}
