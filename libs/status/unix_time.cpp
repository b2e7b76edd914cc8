#include "libs/status/unix_time.hpp"

#include <ctime>

namespace loom {

std::int64_t unix_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::int64_t unix_now_ns() { return unix_ns(std::chrono::system_clock::now()); }

std::int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
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
