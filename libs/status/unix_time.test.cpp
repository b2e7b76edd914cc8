#include "libs/status/unix_time.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>

TEST_CASE("a unix time prints as ISO 8601 in UTC, with the separator asked for") {
  CHECK(loom::utc_text(0) == "1970-01-01T00:00:00Z");
  CHECK(loom::utc_text(1714564800) == "2024-05-01T12:00:00Z");
  CHECK(loom::utc_text(1714564800, ' ') == "2024-05-01 12:00:00Z");
  CHECK(loom::utc_text(-1) == "1969-12-31T23:59:59Z");
}

TEST_CASE("a time gmtime cannot place prints as nothing rather than as garbage") {
  CHECK(loom::utc_text(INT64_MAX).empty());
}

TEST_CASE("unix_ns counts nanoseconds from the epoch and now lies between two readings") {
  using namespace std::chrono;
  CHECK(loom::unix_ns(system_clock::time_point{}) == 0);
  CHECK(loom::unix_ns(system_clock::time_point{seconds(3)} + nanoseconds(7)) == 3'000'000'007);
  const auto before = duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  const std::int64_t now = loom::unix_now_ns();
  const std::int64_t now_s = loom::unix_now_s();
  const auto after = duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  CHECK(now >= before);
  CHECK(now <= after);
  CHECK(now_s >= before / 1'000'000'000);
  CHECK(now_s <= after / 1'000'000'000);
}

TEST_CASE("wall_now steps by the clock fault's seconds while it is armed, within 50 ms, and back when it is gone") {
  using namespace std::chrono;
  char tmpl[] = "/tmp/loom-clock-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl, file = dir + "/clock";
  ::setenv("LOOM_FAULTS_DIR", dir.c_str(), 1);
  auto write = [&](const char* text) {
    std::FILE* f = std::fopen(file.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(text, f);
    std::fclose(f);
  };
  auto offset_s = [] {
    return duration_cast<seconds>(loom::wall_now() - system_clock::now()).count();
  };
  // Waits out the 50 ms recheck: at most 20 tries 10 ms apart.
  auto settles_at = [&](long expected) {
    for (int i = 0; i < 20; ++i) {
      if (std::labs(offset_s() - expected) <= 1) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  };
  write("3600\n");
  CHECK(settles_at(3600));
  CHECK(std::labs(loom::unix_now_s() - duration_cast<seconds>(system_clock::now().time_since_epoch()).count() - 3600) <= 1);
  write("-86400");
  CHECK(settles_at(-86400));
  write("not a number");
  CHECK(settles_at(0));
  write("3600");
  CHECK(settles_at(3600));
  std::remove(file.c_str());
  CHECK(settles_at(0));
  ::unsetenv("LOOM_FAULTS_DIR");
  ::rmdir(dir.c_str());
}

TEST_CASE("steady_wall_now is the wall clock advanced by the steady one: a step of the wall clock does not move it") {
  using namespace std::chrono;
  char tmpl[] = "/tmp/loom-clock-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl, file = dir + "/clock";
  ::setenv("LOOM_FAULTS_DIR", dir.c_str(), 1);
  const auto before = loom::steady_wall_now();
  CHECK(duration_cast<milliseconds>(before > system_clock::now() ? before - system_clock::now()
                                                                 : system_clock::now() - before)
            .count() < 1000);
  std::FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("120\n", f);
  std::fclose(f);
  // The wall clock is 120 s ahead within 50 ms; the steady wall clock is not.
  bool stepped = false;
  for (int i = 0; i < 500 && !stepped; ++i) {  // polled, up to 5 s on a loaded machine
    stepped = loom::wall_now() - system_clock::now() > seconds(100);
    if (!stepped) std::this_thread::sleep_for(milliseconds(10));
  }
  REQUIRE(stepped);
  const auto during = loom::steady_wall_now();
  CHECK(during >= before);
  CHECK(during - before < seconds(5));
  std::remove(file.c_str());
  ::unsetenv("LOOM_FAULTS_DIR");
  ::rmdir(dir.c_str());
  CHECK(loom::steady_wall_now() >= during);  // and never back
}
