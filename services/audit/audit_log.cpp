#include "services/audit/audit_log.hpp"

#include "libs/store/database.hpp"
#include "loom/v1/audit.pb.h"

#include <chrono>
#include <vector>

namespace loom::audit_service {
namespace {
using store::value;

constexpr const char* insert_sql =
    "INSERT INTO audit_events (seq, source, source_seq, unix_ns, principal, role, zone, action, job_id, "
    "request_id, decision, reason, payload, service, peer_key) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";

constexpr const char* select_cols =
    "SELECT source, source_seq, unix_ns, principal, role, zone, action, job_id, request_id, decision, reason, "
    "payload, service, peer_key FROM audit_events";

std::int64_t i64(std::uint64_t v) { return static_cast<std::int64_t>(v); }
}  // namespace

audit_log::audit_log(std::unique_ptr<store::database> db) : db_(std::move(db)) {}
audit_log::~audit_log() = default;

result<std::unique_ptr<audit_log>> audit_log::open(const std::string& url, int deadline_s) {
  auto db = store::database::open_with_retry(url, std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s));
  if (!db) return db.err();
  std::unique_ptr<audit_log> log(new audit_log(std::move(*db)));
  auto loaded = log->db_->with_read_transaction([&](store::transaction& tx) -> status {
    auto marks = tx.query("SELECT source, MAX(source_seq) FROM audit_events GROUP BY source");
    if (!marks) return marks.err();
    for (auto& r : *marks) {
      auto src = r.get_text(0);
      auto seq = r.get_i64(1);
      if (!src || !seq) return make_error(errc::corruption, "audit_events watermark row unreadable");
      log->watermarks_[*src] = static_cast<std::uint64_t>(*seq);
    }
    auto last = tx.query("SELECT COALESCE(MAX(seq), 0) FROM audit_events");
    if (!last) return last.err();
    auto v = (*last)[0].get_i64(0);
    if (!v) return v.err();
    log->last_seq_ = static_cast<std::uint64_t>(*v);
    return {};
  });
  if (!loaded) return loaded.err();
  return log;
}

result<batch_outcome> audit_log::append_batch(std::span<const std::string> events) {
  batch_outcome out;
  std::map<std::string, std::uint64_t> marks;
  std::uint64_t seq;
  {
    std::lock_guard lock(mu_);
    marks = watermarks_;
    seq = last_seq_;
  }
  auto done = db_->with_transaction([&](store::transaction& tx) -> status {
    for (const auto& bytes : events) {
      loom::v1::AuditEvent e;
      if (!e.ParseFromString(bytes) || e.source().empty() || e.source_seq() == 0) {
        ++out.invalid;
        continue;
      }
      auto& mark = marks[e.source()];
      if (e.source_seq() <= mark) {
        ++out.duplicate;
        continue;
      }
      if (e.source_seq() != mark + 1) {
        ++out.gap;
        continue;
      }
      // Built one by one: GCC 12 warns falsely (-Wmaybe-uninitialized) on a
      // braced list of std::variant holding strings.
      std::vector<value> p;
      p.reserve(15);
      p.emplace_back(i64(seq + 1));
      p.emplace_back(e.source());
      p.emplace_back(i64(e.source_seq()));
      p.emplace_back(i64(e.unix_ns()));
      for (const std::string* t : {&e.principal(), &e.role(), &e.zone(), &e.action(), &e.job_id(), &e.request_id()})
        p.emplace_back(*t);
      p.emplace_back(static_cast<std::int64_t>(e.decision()));
      p.emplace_back(e.reason());
      p.emplace_back(store::blob{e.payload()});
      p.emplace_back(e.service());
      p.emplace_back(e.peer_key());
      auto r = tx.exec(insert_sql, p);
      if (!r) return r.err();
      ++seq;
      mark = e.source_seq();
      ++out.stored;
    }
    return {};
  });
  if (!done) return done.err();
  std::lock_guard lock(mu_);
  watermarks_ = std::move(marks);
  last_seq_ = seq;
  return out;
}

std::uint64_t audit_log::watermark(const std::string& source) const {
  std::lock_guard lock(mu_);
  auto it = watermarks_.find(source);
  return it == watermarks_.end() ? 0 : it->second;
}

std::uint64_t audit_log::total() const {
  std::lock_guard lock(mu_);
  return last_seq_;
}

result<std::vector<std::string>> query_events(store::transaction& tx, const std::string& source,
                                              std::uint64_t after_seq, const std::string& request_id,
                                              std::uint32_t limit) {
  std::string sql = select_cols;
  std::vector<value> p;
  bool first = true;
  auto where = [&](const std::string& cond) {
    sql += (first ? " WHERE " : " AND ") + cond;
    first = false;
  };
  if (!source.empty()) {
    p.push_back(source);
    where("source = $" + std::to_string(p.size()));
    p.push_back(i64(after_seq));
    where("source_seq > $" + std::to_string(p.size()));
  }
  if (!request_id.empty()) {
    p.push_back(request_id);
    where("request_id = $" + std::to_string(p.size()));
  }
  sql += " ORDER BY seq LIMIT " + std::to_string(limit);
  auto rows = tx.query(sql, p);
  if (!rows) return rows.err();
  std::vector<std::string> out;
  out.reserve(rows->size());
  for (const auto& r : *rows) {
    loom::v1::AuditEvent e;
    auto text = [&](std::size_t i) { return r.get_text(i).ok() ? *r.get_text(i) : std::string(); };
    auto num = [&](std::size_t i) { return r.get_i64(i).ok() ? *r.get_i64(i) : 0; };
    e.set_source(text(0));
    e.set_source_seq(static_cast<std::uint64_t>(num(1)));
    e.set_unix_ns(static_cast<std::uint64_t>(num(2)));
    e.set_principal(text(3));
    e.set_role(text(4));
    e.set_zone(text(5));
    e.set_action(text(6));
    e.set_job_id(text(7));
    e.set_request_id(text(8));
    e.set_decision(static_cast<loom::v1::Decision>(num(9)));
    e.set_reason(text(10));
    if (!r.is_null(11)) {
      auto b = r.get_blob(11);
      if (b) e.set_payload(b->bytes);
    }
    e.set_service(text(12));
    e.set_peer_key(text(13));
    out.push_back(e.SerializeAsString());
  }
  return out;
}

}  // namespace loom::audit_service
