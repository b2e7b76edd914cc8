#include "services/scheduler/config.hpp"

#include <charconv>
#include <cstring>
#include <string>

namespace loom::scheduler {

// A year: a longer minimum runtime is a typo, not a policy.
constexpr std::uint64_t max_min_runtime_s = 86'400ull * 365;

result<scheduler_config> load_config(const env_lookup& env) {
  scheduler_config c;
  if (const char* v = env("LOOM_SCHEDULER_MIN_RUNTIME_S"); v && *v) {
    std::uint64_t s = 0;
    const auto r = std::from_chars(v, v + std::strlen(v), s);
    if (r.ec != std::errc() || *r.ptr != '\0' || s > max_min_runtime_s)
      return make_error(errc::invalid_argument, std::string("LOOM_SCHEDULER_MIN_RUNTIME_S=") + v +
                                                    " is not a number of seconds (0.." +
                                                    std::to_string(max_min_runtime_s) + ")");
    c.min_runtime = std::chrono::milliseconds(s * 1000);
  }
  return c;
}

}  // namespace loom::scheduler
