#include "services/audit/archive.hpp"

#include "libs/auditchain/store_io.hpp"
#include "libs/auditchain/verifier.hpp"
#include "libs/store/database.hpp"

#include <algorithm>
#include <filesystem>
#include <variant>

namespace loom::audit_service {
namespace {

using namespace loom::auditchain;

std::int64_t i64(std::uint64_t v) { return static_cast<std::int64_t>(v); }

// An integer column that may be NULL (MIN/MAX of nothing): nullopt then.
std::optional<std::int64_t> int_or_null(const store::row& r, std::size_t i) {
  if (auto* p = std::get_if<std::int64_t>(&r[i])) return *p;
  return std::nullopt;
}

std::string days_text(std::chrono::days d) { return std::to_string(d.count()) + " days"; }

struct plan {
  std::uint64_t first = 1, last = 0;
  hash32 prev = genesis_hash;
  std::uint64_t live_first = 0, tail = 0;
  std::string why_none;
  std::vector<chain_row> rows;
  std::vector<checkpoint> checkpoints;
};

result<plan> make_plan(store::transaction& tx, const archive_request& req, std::int64_t cutoff_ns) {
  plan p;
  auto entries = read_archive_entries(tx);
  if (!entries) return entries.err();
  if (!entries->empty()) {
    p.first = entries->back().last_seq + 1;
    p.prev = entries->back().last_hash;
  }
  auto span = tx.query("SELECT MIN(seq), MAX(seq) FROM audit_events");
  if (!span) return span.err();
  auto lo = int_or_null((*span)[0], 0), hi = int_or_null((*span)[0], 1);
  if (!lo || !hi) return p.why_none = "the audit chain has no rows", p;
  p.live_first = static_cast<std::uint64_t>(*lo);
  p.tail = static_cast<std::uint64_t>(*hi);
  if (p.live_first != p.first)
    return make_error(errc::corruption, "the live audit chain starts at seq " + std::to_string(p.live_first) +
                                            " but the archives end at seq " + std::to_string(p.first - 1) +
                                            ": rows are missing or were archived outside audit_archives");
  auto young = tx.query("SELECT MIN(seq) FROM audit_events WHERE unix_ns >= $1", {cutoff_ns});
  if (!young) return young.err();
  std::uint64_t limit = p.tail - 1;  // never the newest row
  if (auto y = int_or_null((*young)[0], 0)) limit = std::min<std::uint64_t>(limit, static_cast<std::uint64_t>(*y) - 1);
  limit = std::min(limit, p.first + req.max_rows - 1);
  if (limit < p.first)
    return p.why_none = "seq " + std::to_string(p.first) + ", the oldest live record, is younger than " +
                        days_text(req.older_than) + " or the newest record",
           p;
  auto cp = tx.query("SELECT MAX(seq) FROM audit_checkpoints WHERE seq >= $1 AND seq <= $2",
                     {i64(p.first), i64(limit)});
  if (!cp) return cp.err();
  auto s = int_or_null((*cp)[0], 0);
  if (!s)
    return p.why_none = "no signed checkpoint closes a segment of records older than " + days_text(req.older_than) +
                        " (seqs " + std::to_string(p.first) + ".." + std::to_string(limit) + ")",
           p;
  p.last = static_cast<std::uint64_t>(*s);
  for (std::uint64_t next = p.first; next <= p.last;) {
    auto page = read_rows(tx, next, std::min<std::uint64_t>(4096, p.last - next + 1));
    if (!page) return page.err();
    if (page->empty()) break;
    for (auto& r : *page) p.rows.push_back(std::move(r));
    next = p.rows.back().seq + 1;
  }
  auto cps = read_checkpoints(tx);
  if (!cps) return cps.err();
  for (auto& c : *cps)
    if (c.seq >= p.first && c.seq <= p.last) p.checkpoints.push_back(std::move(c));
  return p;
}

// The segment links from the hash before it, every row hashes as stored,
// and it reaches the checkpoint that closes it. Signatures are `loom audit
// verify`'s to check (with the trusted public keys); here the checkpoints'
// hashes are held against the rows.
status check_segment(const plan& p) {
  std::vector<anchor> anchors;
  for (const auto& c : p.checkpoints) anchors.push_back(anchor{c.seq, c.row_hash, true, "database", ""});
  chain_verifier v(p.first, p.prev, std::move(anchors));
  for (const auto& r : p.rows)
    if (!v.feed(r)) break;
  auto rep = v.finish();
  if (!rep.ok())
    return make_error(errc::corruption, "the segment of seqs " + std::to_string(p.first) + ".." +
                                            std::to_string(p.last) + " does not verify, nothing archived: " +
                                            rep.summary());
  if (p.rows.empty() || p.rows.back().seq != p.last)
    return make_error(errc::corruption, "seqs " + std::to_string(p.first) + ".." + std::to_string(p.last) +
                                            " are not all in audit_events: nothing archived");
  return ok_status();
}

}  // namespace

result<std::map<std::string, std::uint64_t>> archived_watermarks(store::transaction& tx) {
  auto exists = tx.kind() == store::backend::sqlite
                    ? tx.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_archive_sources'")
                    : tx.query("SELECT 1 FROM information_schema.tables WHERE table_name = 'audit_archive_sources' "
                               "AND table_schema = current_schema()");
  if (!exists) return exists.err();
  std::map<std::string, std::uint64_t> out;
  if (exists->empty()) return out;
  auto rows = tx.query("SELECT source, MAX(max_source_seq) FROM audit_archive_sources GROUP BY source");
  if (!rows) return rows.err();
  for (const auto& r : *rows) {
    auto src = r.get_text(0);
    auto seq = r.get_i64(1);
    if (!src || !seq) return make_error(errc::corruption, "audit_archive_sources: a row is unreadable");
    out[*src] = static_cast<std::uint64_t>(*seq);
  }
  return out;
}

result<archive_outcome> archive_old(store::database& db, const std::string& dir, const archive_request& req,
                                    auditchain::sys_time now) {
  const std::int64_t cutoff_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>((now - req.older_than).time_since_epoch()).count();
  auto p = db.with_read_transaction([&](store::transaction& tx) { return make_plan(tx, req, cutoff_ns); });
  if (!p) return p.err();
  archive_outcome out;
  out.dry_run = req.dry_run;
  out.live_first = p->live_first;
  if (p->last == 0) return out.why_none = p->why_none, out;
  if (auto st = check_segment(*p); !st) return st.err();

  const std::int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  if (req.dry_run) {
    out.entry.first_seq = p->first;
    out.entry.last_seq = p->last;
    out.entry.rows = p->rows.size();
    out.entry.oldest_ns = p->rows.front().unix_ns;
    out.entry.newest_ns = p->rows.front().unix_ns;
    for (const auto& r : p->rows) {
      out.entry.oldest_ns = std::min(out.entry.oldest_ns, r.unix_ns);
      out.entry.newest_ns = std::max(out.entry.newest_ns, r.unix_ns);
    }
    out.entry.file = archive_file_name(p->first, p->last, now_ns);
    return out;
  }
  auto written = write_archive(dir, p->rows, p->checkpoints, now_ns);
  if (!written) return written.err();
  auto moved = db.with_transaction([&](store::transaction& tx) -> result<std::int64_t> {
    if (auto st = insert_archive_entry(tx, *written); !st) return st.err();
    auto kept = tx.exec("INSERT INTO audit_archive_sources (first_seq, source, max_source_seq) "
                        "SELECT $1, source, MAX(source_seq) FROM audit_events WHERE seq >= $2 AND seq <= $3 "
                        "GROUP BY source",
                        {i64(p->first), i64(p->first), i64(p->last)});
    if (!kept) return kept.err();
    auto n = tx.exec("DELETE FROM audit_events WHERE seq >= $1 AND seq <= $2", {i64(p->first), i64(p->last)});
    if (!n) return n.err();
    if (static_cast<std::uint64_t>(*n) != written->rows)
      return make_error(errc::conflict, "deleted " + std::to_string(*n) + " rows of seqs " + std::to_string(p->first) +
                                            ".." + std::to_string(p->last) + ", expected " +
                                            std::to_string(written->rows));
    return *n;
  });
  if (!moved) {
    // Nothing was deleted (the transaction rolled back): the file is not
    // listed anywhere and would only mislead; the refusal is the caller's to audit.
    std::error_code ec;
    std::filesystem::remove(dir + "/" + written->file, ec);
    return error{moved.code(), "nothing archived: " + moved.err().message};
  }
  out.entry = *written;
  out.live_first = p->last + 1;
  return out;
}

}  // namespace loom::audit_service
