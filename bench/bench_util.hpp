// Small helpers every benchmark needs: CPU time of the calling thread (per-core
// speed even while other jobs share the cores), the machine's load for the
// report line, whole-file reads, and the Debian prose files the data benches
// read (present on every Debian machine; nothing committed). Header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace loom::bench {

inline double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// CPU seconds (user + system) process `pid` has used so far, from
// /proc/<pid>/stat; -1 when it cannot be read. A service's CPU per request is
// far steadier than wall-clock throughput on a shared box.
inline double process_cpu_s(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return -1;
  const auto close = line.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // fields 14 and 15: utime, stime in clock ticks
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  return hz > 0 ? static_cast<double>(utime + stime) / static_cast<double>(hz) : -1;
}

// "/proc/loadavg"'s three load averages, "1.10 1.39 2.00".
inline std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// /usr/share/common-licenses/* (sorted) and the copyright files of 19 essential packages.
inline std::vector<std::string> debian_prose_files() {
  static const char* const packages[] = {"base-files", "bash",   "coreutils", "dpkg",      "apt",
                                         "libc6",      "tar",    "grep",      "sed",       "gzip",
                                         "findutils",  "diffutils", "util-linux", "perl-base", "login",
                                         "debianutils", "mawk",  "dash",      "zlib1g"};
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses", ec))
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const char* p : packages) files.push_back(std::string("/usr/share/doc/") + p + "/copyright");
  return files;
}

// n bytes of xorshift64* output from `seed` (the last n % 8 stay zero): data
// that never repeats, so content-defined chunking cuts at its natural rate.
inline std::string pseudo_random(std::size_t n, std::uint64_t seed) {
  std::string s(n, '\0');
  std::uint64_t x = seed;
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    const std::uint64_t v = x * 0x2545f4914f6cdd1dull;
    __builtin_memcpy(s.data() + i, &v, 8);
  }
  return s;
}

}  // namespace loom::bench
