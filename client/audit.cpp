// `loom audit verify|trail|tail|archive` and `loom keys rotate`: the audit log.
// verify reads the state store and the anchor file directly (libs/auditchain):
// it works with the services down and needs no data key, only the anchor
// public keys. trail and tail ask the audit service, which decrypts payloads
// for the roles allowed to read them: an admin every record, a tenant's
// operator only its tenant's (another tenant's job id finds nothing: not_found).
#include "client/cli.hpp"
#include "client/typed_call.hpp"

#include "libs/auditchain/store_io.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/store/database.hpp"
#include "loom/v1/audit.pb.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

namespace loom::cli {
namespace {

using nlohmann::json;


std::string decision_name(int d) {
  switch (d) {
    case loom::v1::ALLOW: return "allow";
    case loom::v1::DENY: return "deny";
    case loom::v1::ERROR: return "error";
    default: return "?";
  }
}

std::string utc(std::uint64_t unix_ns) { return utc_text(static_cast<std::int64_t>(unix_ns / 1000000000ULL)); }

// Printable payloads as text, others as a byte count (print through printable()).
std::string payload_text(const loom::v1::AuditEvent& e) {
  if (!e.payload_state().empty() && e.payload().empty()) return "(" + e.payload_state() + ")";
  const auto& p = e.payload();
  for (unsigned char ch : p)
    if (ch < 0x20 && ch != '\t') return "(" + std::to_string(p.size()) + " bytes)";
  return p;
}

json event_json(const loom::v1::AuditEvent& e) {
  json j{{"seq", e.seq()},           {"unix_ns", e.unix_ns()},       {"time", utc(e.unix_ns())},
         {"source", e.source()},     {"source_seq", e.source_seq()}, {"service", e.service()},
         {"principal", e.principal()}, {"role", e.role()},           {"zone", e.zone()},
         {"action", e.action()},     {"job_id", e.job_id()},         {"request_id", e.request_id()},
         {"decision", decision_name(e.decision())}, {"reason", e.reason()}, {"tenant", e.tenant()}};
  auto text = payload_text(e);
  if (!e.payload().empty()) j["payload"] = json::parse(e.payload(), nullptr, false).is_discarded() ? json(text) : json::parse(e.payload());
  if (!e.payload_state().empty()) j["payload_state"] = e.payload_state();
  return j;
}

void print_event(const loom::v1::AuditEvent& e) {
  std::string who = e.principal().empty() ? "-" : e.principal() + "/" + e.role();
  std::string action = e.action();
  if (action.starts_with("loom.v1.")) action = action.substr(8);
  std::printf("%8llu  %s  %-10s %-22s %-28s %-5s", static_cast<unsigned long long>(e.seq()),
              utc(e.unix_ns()).c_str(), printable(e.service()).c_str(), printable(who).c_str(),
              printable(action).c_str(), decision_name(e.decision()).c_str());
  if (!e.reason().empty()) std::printf("  %s", printable(e.reason()).c_str());
  auto p = payload_text(e);
  if (!p.empty()) std::printf("  %s", printable(p).c_str());
  std::printf("\n");
}

result<loom::v1::AuditQueryReply> query(context& c, const loom::v1::AuditQueryRequest& q) {
  return typed_call<loom::v1::AuditQueryReply>(c, "audit", q, 1);
}

int verify(context& c) {
  const std::uint64_t from = c.a.number("from").value_or(1);
  std::string url = c.a.get_or("database", auditchain::store_url(c.paths.root));
  auto db = store::database::open(url);
  if (!db) return fail(c, db.err());
  auditchain::verify_options o;
  o.from_seq = from;
  o.keys_dir = c.a.get_or("keys", c.paths.audit_keys());
  o.anchor_file = c.a.get_or("anchors", c.paths.audit_anchors());
  o.archive_dir = c.a.get_or("archive", "");
  auto started = std::chrono::steady_clock::now();
  auto rep = auditchain::verify_store(**db, o);
  if (!rep) return fail(c, rep.err());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (c.json) {
    json j{{"ok", rep->ok()},           {"fault", std::string(auditchain::to_string(rep->kind))},
           {"bad_seq", rep->bad_seq},   {"reason", rep->reason},
           {"from_seq", rep->from_seq}, {"last_seq", rep->last_seq},
           {"rows", rep->rows},         {"anchors", rep->anchors},
           {"anchored_seq", rep->anchored_seq}, {"notes", rep->notes},
           {"seconds", secs}};
    print_json(j);
  } else {
    std::printf("%s\n", printable(rep->summary()).c_str());
    for (const auto& n : rep->notes) std::printf("  note: %s\n", printable(n).c_str());
    std::printf("  %llu rows, %llu anchors, anchored up to seq %llu, %.2f s (%s)\n",
                static_cast<unsigned long long>(rep->rows), static_cast<unsigned long long>(rep->anchors),
                static_cast<unsigned long long>(rep->anchored_seq), secs, printable((*db)->masked_url()).c_str());
  }
  return rep->ok() ? ok_exit : error_exit;
}

int archive(context& c) {
  loom::v1::AuditArchiveRequest q;
  q.set_older_than_days(static_cast<std::uint32_t>(c.a.number("older-than-days").value_or(0)));
  q.set_dry_run(c.a.flag("dry-run"));
  auto rep = typed_call<loom::v1::AuditArchiveReply>(c, "audit", q, 1);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    print_json({{"first_seq", rep->first_seq()},
                {"last_seq", rep->last_seq()},
                {"rows", rep->rows()},
                {"file", rep->file()},
                {"sha256", rep->sha256()},
                {"oldest", rep->rows() ? utc(static_cast<std::uint64_t>(rep->oldest_unix_ns())) : ""},
                {"newest", rep->rows() ? utc(static_cast<std::uint64_t>(rep->newest_unix_ns())) : ""},
                {"why_none", rep->why_none()},
                {"dry_run", rep->dry_run()},
                {"older_than_days", rep->older_than_days()},
                {"live_first_seq", rep->live_first_seq()}});
    return ok_exit;
  }
  if (rep->rows() == 0) {
    std::printf("nothing archived (records older than %u days): %s\n", rep->older_than_days(),
                printable(rep->why_none()).c_str());
    return ok_exit;
  }
  std::printf("%s seqs %llu..%llu (%llu records, %s .. %s) %s %s\n", rep->dry_run() ? "would archive" : "archived",
              static_cast<unsigned long long>(rep->first_seq()), static_cast<unsigned long long>(rep->last_seq()),
              static_cast<unsigned long long>(rep->rows()),
              utc(static_cast<std::uint64_t>(rep->oldest_unix_ns())).c_str(),
              utc(static_cast<std::uint64_t>(rep->newest_unix_ns())).c_str(), rep->dry_run() ? "as" : "to",
              printable(rep->file()).c_str());
  if (!rep->dry_run())
    std::printf("  sha256 %s; the live chain starts at seq %llu; check both with: loom audit verify --archive "
                "<the audit service's data dir>/audit/archive\n",
                rep->sha256().c_str(), static_cast<unsigned long long>(rep->live_first_seq()));
  return ok_exit;
}

int trail(context& c) {
  auto& pos = c.a.positional;
  if (pos.size() < 3 || pos[2].empty()) return usage(usage_line(*c.a.command));
  loom::v1::AuditQueryRequest q;
  q.set_job_id(pos[2]);
  q.set_limit(10000);
  auto rep = query(c, q);
  if (!rep) return fail(c, rep.err());
  if (rep->events().empty())
    return fail(c, make_error(errc::not_found, "no audit events for job " + pos[2]));
  if (c.json) {
    json events = json::array();
    for (const auto& e : rep->events()) events.push_back(event_json(e));
    print_json({{"job_id", pos[2]}, {"events", events}});
    return ok_exit;
  }
  std::printf("audit trail of job %s (%d events)\n", printable(pos[2]).c_str(), rep->events_size());
  for (const auto& e : rep->events()) print_event(e);
  return ok_exit;
}

int tail(context& c) {
  const std::uint64_t lines = c.a.number("lines").value_or(20);  // 1..10000: the table's range
  loom::v1::AuditQueryRequest q;
  q.set_newest(true);
  q.set_limit(static_cast<std::uint32_t>(lines));
  auto rep = query(c, q);
  if (!rep) return fail(c, rep.err());
  std::uint64_t last = 0;
  auto show = [&](const loom::v1::AuditQueryReply& r) {
    for (const auto& e : r.events()) {
      if (c.json) print_json(event_json(e));
      else print_event(e);
      last = std::max<std::uint64_t>(last, e.seq());
    }
    std::fflush(stdout);
  };
  show(*rep);
  if (!c.a.flag("follow")) return ok_exit;
  for (;;) {  // until interrupted
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    loom::v1::AuditQueryRequest more;
    more.set_after_chain_seq(last);
    more.set_limit(1000);
    auto r = query(c, more);
    if (!r) return fail(c, r.err());
    show(*r);
  }
}

}  // namespace

int cmd_audit(context& c) {
  auto& pos = c.a.positional;
  std::string sub = pos.size() > 1 ? pos[1] : "";
  if (sub == "verify") return verify(c);
  if (sub == "trail") return trail(c);
  if (sub == "tail") return tail(c);
  if (sub == "archive") return archive(c);
  return usage("usage:\n" + overview("audit"));
}

int cmd_keys_rotate(context& c) {
  auto rep = typed_call<loom::v1::RotateKeysReply>(c, "audit", loom::v1::RotateKeysRequest{}, 1);
  if (!rep) return fail(c, rep.err());
  if (c.json) print_json({{"kek_version", rep->kek_version()}});
  else
    std::printf("audit key-encryption key rotated: version %u wraps new day keys; older versions only decrypt\n",
                rep->kek_version());
  return ok_exit;
}

}  // namespace loom::cli
