#include "libs/runtime/process_box.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace loom;

namespace {

// Forks a child that joins `box` and then touches `mib` MiB in 8 MiB pieces:
// exits 0 when all of it was given, 3 when an allocation failed, 4 when it
// could not join. Returns waitpid's status.
int allocate_in(const runtime::process_box& box, int mib) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!box.enter()) ::_exit(4);
    for (int got = 0; got < mib; got += 8) {
      void* p = std::malloc(8u << 20);
      if (!p) ::_exit(3);
      std::memset(p, 1, 8u << 20);
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace

TEST_CASE("a box on this machine's cgroups has the kernel kill a child that allocates past its memory limit") {
  auto box = runtime::process_box::make("oom-test", {64ull << 20, 1});
  if (box.mode() == runtime::box_mode::rlimit) {
    MESSAGE("LOOM_TEST_SKIPPED: this machine lets this process make no cgroup (" << box.describe() << ")");
    return;
  }
  MESSAGE("box: " << box.describe());
  CHECK(box.describe().find("memory <= 64 MiB") != std::string::npos);
  CHECK(box.oom_kills() == 0);
  const int status = allocate_in(box, 512);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(box.oom_kills() >= 1);
  // Within its limit the same child lives.
  auto roomy = runtime::process_box::make("roomy", {256ull << 20, 0});
  const int fine = allocate_in(roomy, 64);
  CHECK(WIFEXITED(fine));
  CHECK(WEXITSTATUS(fine) == 0);
  CHECK(roomy.oom_kills() == 0);
}

TEST_CASE("without a cgroup the box sets RLIMIT_DATA, an allocation past it fails in the child, and it says why") {
  auto box = runtime::process_box::make("rlimit-test", {64ull << 20, 2}, {"/proc", "/nonexistent-cgroup-root"});
  REQUIRE(box.mode() == runtime::box_mode::rlimit);
  CHECK(box.describe().starts_with("setrlimit: data <= 64 MiB, no CPU limit (no cgroup hierarchy under /nonexistent-cgroup-root)"));
  const int status = allocate_in(box, 512);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(box.oom_kills() == 0);
}

TEST_CASE("a box's cgroups are gone once it ends") {
  std::string described;
  {
    auto box = runtime::process_box::make("cleanup-test", {128ull << 20, 1});
    described = box.describe();
    if (box.mode() == runtime::box_mode::rlimit) {
      MESSAGE("LOOM_TEST_SKIPPED: no cgroup here (" << described << ")");
      return;
    }
    CHECK(allocate_in(box, 8) == 0);
  }
  // The leaf's name carries this pid: nothing of ours is left in any hierarchy.
  const std::string mark = "loom-" + std::to_string(::getpid()) + "-";
  bool left = false;
  std::FILE* f = ::popen(("find /sys/fs/cgroup -maxdepth 6 -type d -name '" + mark + "*' 2>/dev/null").c_str(), "r");
  REQUIRE(f);
  char line[512];
  while (std::fgets(line, sizeof line, f)) left = true;
  ::pclose(f);
  CHECK_FALSE(left);
}
