// `loom keys status`: the deployment's key-encryption keys and their ages —
// the audit keyring's (payloads of the audit chain) and the at-rest ones
// (libs/atrest) — with when the next scheduled rotation is due. Reads the key
// directories directly (the owner's files, 0600): no service is asked and no
// key is printed or kept.
#include "client/cli.hpp"

#include "libs/atrest/kek_store.hpp"
#include "libs/auditchain/keyring.hpp"
#include "libs/status/unix_time.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace loom::cli {
namespace {

using nlohmann::json;

// LOOM_AUDIT_KEK_ROTATION_DAYS as the audit service reads it (its default when unset or not a number).
long rotation_days(const char* var, long fallback) {
  const char* v = std::getenv(var);
  long d = 0;
  if (v == nullptr || std::from_chars(v, v + std::strlen(v), d).ec != std::errc() || d < 1) return fallback;
  return d;
}

struct ring {
  std::string name, dir, setting;
  long rotation_days = 30;
  std::vector<std::pair<std::uint32_t, std::int64_t>> keks;  // version, created ns
  std::string note;  // when there are none
};

}  // namespace

int cmd_keys_status(context& c) {
  const auto now = loom::wall_now();
  const std::int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  std::vector<ring> rings;

  ring audit{"audit", c.paths.audit_keys(), "LOOM_AUDIT_KEK_ROTATION_DAYS",
             rotation_days("LOOM_AUDIT_KEK_ROTATION_DAYS", 30), {}, ""};
  auditchain::keyring_options ao;
  ao.create = false;
  if (auto k = auditchain::keyring::open(audit.dir, ao, now))
    audit.keks = (*k)->kek_ages();
  else if (k.code() == errc::not_found)
    audit.note = "none yet (the audit service makes version 1 at its first start)";
  else
    return fail(c, k.err());
  if (audit.keks.empty() && audit.note.empty()) audit.note = "none yet (the audit service makes version 1 at its first start)";
  rings.push_back(std::move(audit));

  ring at_rest{"at rest", c.paths.atrest_keys(), "LOOM_AT_REST_ROTATION_DAYS",
               rotation_days("LOOM_AT_REST_ROTATION_DAYS", 30), {}, ""};
  auto listed = atrest::list_keks(at_rest.dir);
  if (!listed) return fail(c, listed.err());
  for (const auto& k : *listed) at_rest.keks.emplace_back(k.version, k.created_ns);
  if (at_rest.keks.empty())
    at_rest.note = "none yet (the services make version 1 at their first start; the trainer seals snapshots and "
                   "stage data with it)";
  rings.push_back(std::move(at_rest));

  const double day_ns = 86400e9;
  if (c.json) {
    json out = json::array();
    for (const auto& r : rings) {
      json keks = json::array();
      for (const auto& [v, created] : r.keks)
        keks.push_back({{"version", v},
                        {"created", utc_text(created / 1000000000)},
                        {"age_days", static_cast<double>(now_ns - created) / day_ns}});
      json j{{"keys", r.name}, {"dir", r.dir}, {"rotation_days", r.rotation_days}, {"keks", keks}};
      if (!r.keks.empty()) {
        const double due = static_cast<double>(r.keks.back().second - now_ns) / day_ns + static_cast<double>(r.rotation_days);
        j["next_rotation_in_days"] = due;
      } else {
        j["note"] = r.note;
      }
      out.push_back(j);
    }
    print_json({{"key_encryption_keys", out}});
    return ok_exit;
  }
  for (const auto& r : rings) {
    std::printf("%s keys (%s; rotated every %ld days, %s)\n", r.name.c_str(), printable(r.dir).c_str(),
                r.rotation_days, r.setting.c_str());
    if (r.keks.empty()) {
      std::printf("  %s\n", r.note.c_str());
      continue;
    }
    for (const auto& [v, created] : r.keks)
      std::printf("  version %u  created %s  age %.1f days%s\n", v, utc_text(created / 1000000000).c_str(),
                  static_cast<double>(now_ns - created) / day_ns,
                  v == r.keks.back().first ? "  (wraps new keys)" : "  (unwraps only)");
    const double due = static_cast<double>(r.keks.back().second - now_ns) / day_ns + static_cast<double>(r.rotation_days);
    if (due > 0)
      std::printf("  next rotation: in %.1f days, at the first use after it is due\n", due);
    else
      std::printf("  next rotation: due now (at the next use)\n");
  }
  return ok_exit;
}

}  // namespace loom::cli
