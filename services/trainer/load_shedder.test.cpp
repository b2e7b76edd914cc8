#include "services/trainer/load_shedder.hpp"

#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

using namespace loom;
using namespace std::chrono_literals;

namespace {
const trainer::load_shedder::clock::time_point t0{};

struct machine {
  files::temp_dir dir{"loom-shedder"};
  machine() {
    std::filesystem::create_directories(dir.path() + "/proc");
    std::ofstream(dir.path() + "/proc/meminfo") << "MemTotal: 8388608 kB\nMemAvailable: 6291456 kB\n";
  }
  std::string inject() const { return dir.path() + "/pressure"; }
  void press(const std::string& text) const { std::ofstream(inject()) << text; }
  trainer::load_shedder shedder(std::chrono::milliseconds pause_after = 3s) const {
    runtime::shed_settings s;
    s.pause_after = pause_after;
    s.inject = inject();
    return trainer::load_shedder(s, {dir.path() + "/proc", dir.path() + "/no-cgroup", ""});
  }
};
}  // namespace

TEST_CASE("the shedder sheds once per fresh high reading and reports the level the scheduler acts on") {
  machine m;
  auto sh = m.shedder();
  CHECK(sh.observe(true, t0).empty());
  CHECK(sh.facts().level == "ok");
  CHECK(sh.facts().memory == doctest::Approx(0.25));
  CHECK(sh.shed_reason().empty());

  m.press("memory=0.96\n");
  CHECK(sh.observe(true, t0 + 1s).empty());
  CHECK(sh.facts().level == "high");
  const std::string why = sh.shed_reason();
  CHECK(why.find("memory 96%") != std::string::npos);
  CHECK(why.find("injected (" + m.inject() + ")") != std::string::npos);
  CHECK(sh.shed_reason().empty());  // the same reading: not twice
  (void)sh.observe(true, t0 + 2s);   // taken while the shed was happening: does not count
  CHECK(sh.shed_reason().empty());
  (void)sh.observe(true, t0 + 3s);   // still high after it: shed again
  CHECK_FALSE(sh.shed_reason().empty());
  (void)sh.observe(true, t0 + 4s);
  CHECK(sh.facts().level == "sustained");  // high for 3 s while running
  CHECK(sh.facts().why.find("for 3 s") != std::string::npos);

  m.press("memory=0.2\n");
  (void)sh.observe(true, t0 + 5s);
  CHECK(sh.facts().level == "ok");
  CHECK(sh.facts().why.empty());
  CHECK(sh.shed_reason().empty());
}

TEST_CASE("a malformed injection keeps the last level and is reported once") {
  machine m;
  auto sh = m.shedder();
  m.press("memory=0.97\n");
  (void)sh.observe(true, t0);
  REQUIRE(sh.facts().level == "high");
  m.press("memory=ninety\n");
  const std::string said = sh.observe(true, t0 + 1s);
  CHECK(said.find(m.inject() + ":1") != std::string::npos);
  CHECK(sh.observe(true, t0 + 2s).empty());  // the same error: said once
  CHECK(sh.facts().level == "high");
}
