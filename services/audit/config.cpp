#include "services/audit/config.hpp"

#include "libs/auditchain/keyring.hpp"
#include "libs/wire/endpoint.hpp"

#include <charconv>
#include <cstring>

namespace loom::audit_service {
namespace {

// Ten years: a longer rotation age is a typo, not a policy.
constexpr std::int64_t max_rotation_days = 3650;
// A century: past it, days overflow nothing but are surely a typo.
constexpr std::int64_t max_retention_days = 36500;

error bad(std::string why) { return make_error(errc::invalid_argument, std::move(why)); }

// $name as whole days in [lo, hi]; `fallback` when unset or empty.
result<std::chrono::days> days_from_env(const env_lookup& env, const char* name, std::int64_t lo, std::int64_t hi,
                                        std::chrono::days fallback) {
  const char* v = env(name);
  if (!v || !*v) return fallback;
  std::int64_t d = 0;
  const auto r = std::from_chars(v, v + std::strlen(v), d);
  if (r.ec != std::errc() || *r.ptr != '\0' || d < lo || d > hi)
    return bad(std::string(name) + "=" + v + " is not a number of days (" + std::to_string(lo) + ".." +
               std::to_string(hi) + ")");
  return std::chrono::days(d);
}

}  // namespace

result<audit_config> load_config(const std::vector<std::string>& argv, const env_lookup& env) {
  audit_config c;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] != "--pull-bind") {
      c.runtime_args.push_back(argv[i]);
      continue;
    }
    if (i + 1 >= argv.size() || argv[i + 1].empty()) return bad("--pull-bind needs a value (tcp://HOST:PORT)");
    c.pull_bind = argv[++i];
    if (!wire::valid_tcp_endpoint(c.pull_bind, wire::endpoint_use::bind))
      return bad("--pull-bind '" + c.pull_bind + "': want tcp://HOST:PORT (HOST may be *, PORT 1..65535 or *)");
  }
  auto rotation = days_from_env(env, "LOOM_AUDIT_KEK_ROTATION_DAYS", 1, max_rotation_days, c.kek_rotation);
  if (!rotation) return rotation.err();
  c.kek_rotation = *rotation;
  auto retention = days_from_env(env, "LOOM_AUDIT_RETENTION_DAYS", auditchain::min_retention.count(),
                                 max_retention_days, c.retention);
  if (!retention) return retention.err();
  c.retention = *retention;
  return c;
}

}  // namespace loom::audit_service
