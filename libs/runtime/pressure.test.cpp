#include "libs/runtime/pressure.hpp"

#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace fs = std::filesystem;
using namespace loom;
using namespace std::chrono_literals;
using runtime::pressure_level;

namespace {

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// A fake /proc and /sys/fs/cgroup under one temp dir.
struct fake_machine {
  files::temp_dir dir{"loom-pressure"};
  runtime::pressure_paths paths() const {
    return {dir.path() + "/proc", dir.path() + "/cgroup", dir.path() + "/inject"};
  }
  void meminfo(std::uint64_t total_kb, std::uint64_t avail_kb) {
    write(dir.path() + "/proc/meminfo", "MemTotal:       " + std::to_string(total_kb) +
                                            " kB\nMemFree:          1000 kB\nMemAvailable:   " +
                                            std::to_string(avail_kb) + " kB\n");
  }
};

const runtime::pressure_gauge::clock::time_point t0{};

}  // namespace

TEST_CASE("pressure is the machine's used memory from /proc/meminfo when no cgroup limits this process") {
  fake_machine m;
  m.meminfo(8 << 20, 2 << 20);  // 8 GiB, 2 GiB available
  write(m.dir.path() + "/proc/self/cgroup", "0::/user.slice/session-1.scope\n");
  write(m.dir.path() + "/cgroup/user.slice/session-1.scope/memory.max", "max\n");
  write(m.dir.path() + "/cgroup/user.slice/session-1.scope/memory.current", "123\n");
  write(m.dir.path() + "/proc/pressure/cpu", "some avg10=12.50 avg60=3.00 avg300=1.00 total=99\nfull avg10=0.00\n");
  auto r = runtime::read_pressure(m.paths());
  REQUIRE(r);
  CHECK(r->memory == doctest::Approx(0.75));
  CHECK(r->limit_bytes == (8ull << 30));
  CHECK(r->memory_source == m.dir.path() + "/proc/meminfo");
  CHECK(r->cpu == doctest::Approx(12.5));
}

TEST_CASE("pressure is the working set against the nearest cgroup v2 memory.max above this process") {
  fake_machine m;
  m.meminfo(8 << 20, 7 << 20);  // the machine is nearly idle
  write(m.dir.path() + "/proc/self/cgroup", "0::/loom/trainer/stage-1\n");
  write(m.dir.path() + "/cgroup/loom/trainer/stage-1/memory.max", "max\n");
  write(m.dir.path() + "/cgroup/loom/trainer/stage-1/memory.current", "100\n");
  write(m.dir.path() + "/cgroup/loom/trainer/memory.max", "1000\n");
  write(m.dir.path() + "/cgroup/loom/trainer/memory.current", "990\n");
  write(m.dir.path() + "/cgroup/loom/trainer/memory.stat", "anon 900\nfile 90\nactive_file 50\ninactive_file 40\n");
  auto r = runtime::read_pressure(m.paths());
  REQUIRE(r);
  CHECK(r->memory == doctest::Approx(0.95));  // the page cache the kernel drops first is not counted
  CHECK(r->memory_source == "cgroup v2 memory.max");
  CHECK(r->cpu == -1);  // no PSI file: unknown, never "no pressure"
}

TEST_CASE("on a cgroup v1 machine the memory controller's nearest limit counts, and its 'no limit' number does not") {
  fake_machine m;
  m.meminfo(8 << 20, 7 << 20);
  write(m.dir.path() + "/proc/self/cgroup",
        "9:name=systemd:/\n4:memory:/process_api/abc\n3:cpuset,cpu:/\n0::/\n");
  const std::string dir = m.dir.path() + "/cgroup/memory/process_api/abc";
  write(dir + "/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "unlimited"
  write(dir + "/memory.usage_in_bytes", "5000\n");
  auto r = runtime::read_pressure(m.paths());
  REQUIRE(r);
  CHECK(r->memory_source == m.dir.path() + "/proc/meminfo");  // no limit anywhere: the machine
  write(m.dir.path() + "/cgroup/memory/process_api/memory.limit_in_bytes", "10000\n");
  write(m.dir.path() + "/cgroup/memory/process_api/memory.usage_in_bytes", "9500\n");
  write(m.dir.path() + "/cgroup/memory/process_api/memory.stat", "cache 800\ninactive_file 5\ntotal_inactive_file 500\n");
  r = runtime::read_pressure(m.paths());
  REQUIRE(r);
  CHECK(r->memory_source == "cgroup v1 memory.limit_in_bytes");
  CHECK(r->limit_bytes == 10000);
  CHECK(r->memory == doctest::Approx(0.90));  // (9500 - 500) / 10000
}

TEST_CASE("an injected reading replaces the measured values it names, and a malformed one is refused naming the line") {
  fake_machine m;
  m.meminfo(8 << 20, 6 << 20);
  auto plain = runtime::read_pressure(m.paths());
  REQUIRE(plain);  // no injection file yet: the measurement
  CHECK(plain->memory == doctest::Approx(0.25));
  write(m.paths().inject, "# rehearsal\nmemory=0.97\n");
  auto r = runtime::read_pressure(m.paths());
  REQUIRE(r);
  CHECK(r->memory == doctest::Approx(0.97));
  CHECK(r->memory_source == "injected (" + m.paths().inject + ")");
  write(m.paths().inject, "memory=0.5\ncpu=lots\n");
  auto bad = runtime::read_pressure(m.paths());
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find(m.paths().inject + ":2") != std::string::npos);
  write(m.paths().inject, "swap=1\n");
  bad = runtime::read_pressure(m.paths());
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("unknown key \"swap\"") != std::string::npos);
}

TEST_CASE("an unreadable meminfo is an error, not a reading of zero") {
  fake_machine m;
  auto r = runtime::read_pressure(m.paths());
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("/proc/meminfo") != std::string::npos);
}

TEST_CASE("the gauge is high past a threshold and sustained only after pause_after of running under it") {
  runtime::shed_settings s;
  s.memory = 0.9;
  s.pause_after = 30s;
  runtime::pressure_gauge g(s);
  runtime::pressure_reading calm{0.5, 1, 2, -1, "/proc/meminfo", ""}, pressed{0.95, 19, 20, -1, "/proc/meminfo", ""};
  CHECK(g.update(calm, t0, true) == pressure_level::ok);
  CHECK(g.why().empty());
  CHECK(g.update(pressed, t0 + 1s, false) == pressure_level::high);  // idle: the sustained clock does not run
  CHECK(g.update(pressed, t0 + 60s, false) == pressure_level::high);
  CHECK(g.update(pressed, t0 + 61s, true) == pressure_level::high);  // a stage runs: the clock starts now
  CHECK(g.why().find("memory 95%") != std::string::npos);
  CHECK(g.why().find(">= 90%") != std::string::npos);
  CHECK(g.update(pressed, t0 + 90s, true) == pressure_level::high);
  CHECK(g.update(pressed, t0 + 91s, true) == pressure_level::sustained);
  CHECK(g.why().find("for 30 s") != std::string::npos);
  CHECK(g.update(calm, t0 + 92s, true) == pressure_level::ok);  // a break resets the clock
  CHECK(g.update(pressed, t0 + 93s, true) == pressure_level::high);
}

TEST_CASE("cpu pressure counts only where a threshold is set, and an unknown reading never counts") {
  runtime::shed_settings s;
  runtime::pressure_gauge off(s);  // the default: cpu 0, never by CPU
  runtime::pressure_reading busy{0.1, 1, 10, 99, "/proc/meminfo", "/proc/pressure/cpu"};
  CHECK(off.update(busy, t0, true) == pressure_level::ok);
  s.cpu = 80;
  runtime::pressure_gauge on(s);
  CHECK(on.update(busy, t0, true) == pressure_level::high);
  CHECK(on.why().find("cpu pressure 99% >= 80%") != std::string::npos);
  busy.cpu = -1;
  CHECK(on.update(busy, t0 + 1s, true) == pressure_level::ok);
}

TEST_CASE("shed settings come from the environment and a bad value names its variable") {
  std::map<std::string, std::string> env{{"LOOM_SHED_MEMORY", "0.8"}, {"LOOM_SHED_PAUSE_AFTER_S", "2.5"},
                                         {"LOOM_PRESSURE_FILE", "/tmp/p"}};
  auto get = [&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto s = runtime::shed_settings_from_env(get);
  REQUIRE(s);
  CHECK(s->memory == doctest::Approx(0.8));
  CHECK(s->cpu == 0);
  CHECK(s->pause_after == 2500ms);
  CHECK(s->inject == "/tmp/p");
  env["LOOM_SHED_MEMORY"] = "1.5";
  auto bad = runtime::shed_settings_from_env(get);
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("LOOM_SHED_MEMORY=1.5") != std::string::npos);
  env["LOOM_SHED_MEMORY"] = "0.9";
  env["LOOM_SHED_CPU"] = "high";
  CHECK_FALSE(runtime::shed_settings_from_env(get));
}
