#include "libs/status/unix_time.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <cerrno>
#include <cstdlib>
#include <ctime>

namespace loom {
namespace {

constexpr std::int64_t recheck_ns = 50'000'000;
std::atomic<std::int64_t> g_offset_ns{0};
std::atomic<std::int64_t> g_next_check_ns{0};  // steady clock

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The armed clock offset in nanoseconds: 0 without LOOM_FAULTS_DIR/clock, or
// when it does not hold a whole number of seconds.
std::int64_t read_offset_ns() {
  const char* dir = std::getenv("LOOM_FAULTS_DIR");
  if (!dir || !*dir) return 0;
  const std::string path = std::string(dir) + "/clock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  char* end = nullptr;
  errno = 0;
  const long long s = std::strtoll(buf, &end, 10);
  if (errno != 0 || end == buf || s < -100LL * 365 * 86400 || s > 100LL * 365 * 86400) return 0;
  return static_cast<std::int64_t>(s) * 1'000'000'000;
}

}  // namespace

std::chrono::system_clock::time_point wall_now() {
  const std::int64_t t = steady_ns();
  if (t >= g_next_check_ns.load(std::memory_order_relaxed)) {
    g_next_check_ns.store(t + recheck_ns, std::memory_order_relaxed);
    g_offset_ns.store(read_offset_ns(), std::memory_order_relaxed);
  }
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::nanoseconds(g_offset_ns.load(std::memory_order_relaxed)));
}

std::chrono::system_clock::time_point steady_wall_now() {
  using namespace std::chrono;
  static std::mutex mu;
  static bool anchored = false;
  static system_clock::time_point anchor_wall;
  static steady_clock::time_point anchor_steady, disagree_since;
  static bool disagreeing = false;
  const auto s = steady_clock::now();
  const auto w = wall_now();
  std::lock_guard lock(mu);
  if (!anchored) {
    anchored = true;
    anchor_wall = w;
    anchor_steady = s;
  }
  auto t = anchor_wall + duration_cast<system_clock::duration>(s - anchor_steady);
  const auto apart = w > t ? w - t : t - w;
  if (apart <= seconds(1)) {
    disagreeing = false;
  } else if (!disagreeing) {
    disagreeing = true;
    disagree_since = s;
  } else if (s - disagree_since >= seconds(60)) {  // it stayed: a correction, taken now
    anchor_wall = t = w;
    anchor_steady = s;
    disagreeing = false;
  }
  return t;
}

std::int64_t unix_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::int64_t unix_now_ns() { return unix_ns(wall_now()); }

std::int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(wall_now().time_since_epoch()).count();
}

std::string utc_text(std::int64_t unix_s, char sep) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  char buf[40];
  const char format[] = {'%', 'Y', '-', '%', 'm', '-', '%', 'd', sep, '%', 'H', ':', '%', 'M', ':', '%', 'S', 'Z', '\0'};
  if (!::gmtime_r(&t, &tm) || std::strftime(buf, sizeof buf, format, &tm) == 0) return "";
  return buf;
}

}  // namespace loom
