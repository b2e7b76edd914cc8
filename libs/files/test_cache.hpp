// Tests only: where a test process may keep something expensive it made (a
// trained model) for the next process of the same test binary. ctest runs
// every test case in a process of its own, so a fixture that trains "once
// per process" trains once per case; with this it trains once per build.
// The path names the binary's size and modification time: a rebuilt test
// binary never sees what an older one made, so a change to the code under
// test is always trained afresh. Writers must publish atomically (two
// processes may make the same thing at once; either copy is the same).
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace loom::files::testing {

inline std::string test_cache_path(std::string_view tag) {
  struct stat st {};
  ::stat("/proc/self/exe", &st);
  std::error_code ec;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/loom-test-cache";
  std::filesystem::create_directories(dir, ec);
  return dir + "/" + std::string(tag) + "-" + std::to_string(st.st_size) + "-" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace loom::files::testing
