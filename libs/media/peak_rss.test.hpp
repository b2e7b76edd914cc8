// Tests only: the peak-RSS growth of one call, measured in a forked child (a
// fresh peak counter: the parent's earlier peaks do not hide it). For the
// decompression-bomb and audio-length budgets of hostile.test.cpp and
// audio_hostile.test.cpp. Call from the doctest thread.
#pragma once

#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace loom::media::testing {

inline long peak_rss_kb() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

// The growth of the child's peak RSS in MiB while f() ran (at most 250), or
// -1 when f returned false or the child failed.
template <class F>
long child_peak_growth_mb(F&& f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const long before = peak_rss_kb();
    const bool ok = f();
    const long growth_mb = (peak_rss_kb() - before) / 1024;
    ::_exit(ok ? static_cast<int>(std::min(growth_mb, 250L)) : 255);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status) == 255 ? -1 : WEXITSTATUS(status);
}

}  // namespace loom::media::testing
