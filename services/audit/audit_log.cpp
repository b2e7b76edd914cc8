#include "services/audit/audit_log.hpp"

#include "libs/auditchain/anchor_file.hpp"
#include "libs/auditchain/envelope.hpp"
#include "libs/auditchain/store_io.hpp"
#include "libs/auditchain/writer.hpp"
#include "libs/files/files.hpp"
#include "libs/store/database.hpp"
#include "services/audit/archive.hpp"
#include "services/audit/wire.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace loom::audit_service {
namespace {
using store::value;

std::int64_t i64(std::uint64_t v) { return static_cast<std::int64_t>(v); }

constexpr const char* v1_cols =
    "source, source_seq, unix_ns, principal, role, zone, action, job_id, request_id, decision, reason, "
    "payload, service, peer_key";

}  // namespace

audit_log::audit_log(audit_log_options o) : opt_(std::move(o)) {}
audit_log::~audit_log() = default;

result<std::unique_ptr<audit_log>> audit_log::open(audit_log_options o) {
  std::unique_ptr<audit_log> log(new audit_log(std::move(o)));
  auto& opt = log->opt_;
  auto db = store::database::open_with_retry(opt.url, std::chrono::steady_clock::now() +
                                                          std::chrono::seconds(opt.deadline_s));
  if (!db) return db.err();
  log->db_ = std::move(*db);
  auto keys = auditchain::keyring::open(opt.keys_dir, opt.keyring, opt.clock());
  if (!keys) return keys.err();
  log->keys_ = std::move(*keys);
  // A key made here starts its anchor file with a genesis checkpoint, so a
  // later emptied or deleted file fails `loom audit verify`.
  auto signer = auditchain::anchor_signer::load(opt.keys_dir);
  bool new_key = false;
  if (!signer && signer.code() == errc::not_found) {
    signer = auditchain::anchor_signer::generate(opt.keys_dir);
    new_key = signer.ok();
    if (signer.code() == errc::already_exists) signer = auditchain::anchor_signer::load(opt.keys_dir);
  }
  if (!signer) return signer.err();
  log->signer_.emplace(std::move(*signer));
  if (auto slash = opt.anchor_path.rfind('/'); slash != std::string::npos && slash > 0)
    if (auto st = files::make_dirs(opt.anchor_path.substr(0, slash), 0755); !st) return st.err();
  auto file = auditchain::anchor_file::open(opt.anchor_path);
  if (!file) return file.err();
  log->file_ = std::move(*file);
  if (new_key)
    if (auto st = auditchain::anchor_genesis(*log->file_, *log->signer_, opt.clock()); !st) return st.err();
  if (auto st = log->load(); !st) return st.err();
  return log;
}

status audit_log::load() {
  writer_.reset();
  std::map<std::string, std::uint64_t> marks;
  auto loaded = db_->with_read_transaction([&](store::transaction& tx) -> status {
    for (const char* table : {"audit_events_v1", "audit_events"}) {
      auto rows = tx.query(std::string("SELECT source, MAX(source_seq) FROM ") + table + " GROUP BY source");
      if (!rows) return rows.err();
      for (auto& r : *rows) {
        auto src = r.get_text(0);
        auto seq = r.get_i64(1);
        if (!src || !seq) return make_error(errc::corruption, std::string(table) + ": watermark row unreadable");
        auto& m = marks[*src];
        m = std::max(m, static_cast<std::uint64_t>(*seq));
      }
    }
    // Sources whose records were archived (some or all of them).
    auto archived = archived_watermarks(tx);
    if (!archived) return archived.err();
    for (const auto& [src, seq] : *archived) marks[src] = std::max(marks[src], seq);
    return {};
  });
  if (!loaded) return loaded.err();
  auto w = auditchain::chain_writer::open(
      *db_, auditchain::writer_parts{keys_.get(), &*signer_, file_.get(), opt_.policy, {}}, opt_.clock());
  if (!w) return w.err();
  writer_ = std::move(*w);
  std::lock_guard lock(mu_);
  watermarks_ = std::move(marks);
  last_seq_ = writer_->committed_tail().last_seq;
  anchored_ = writer_->anchored_seq();
  return {};
}

result<batch_outcome> audit_log::append_batch(std::span<const std::string> events) {
  if (!writer_)
    if (auto st = load(); !st) return st.err();
  batch_outcome out;
  std::map<std::string, std::uint64_t> marks;
  {
    std::lock_guard lock(mu_);
    marks = watermarks_;
  }
  auto now = opt_.clock();
  auto done = db_->with_transaction([&](store::transaction& tx) -> status {
    for (const auto& bytes : events) {
      auto e = event_from_wire(bytes);
      if (!e) {
        ++out.invalid;
        continue;
      }
      const std::uint64_t source_seq = e->row.source_seq;
      auto& mark = marks[e->row.source];
      if (source_seq <= mark) {
        ++out.duplicate;
        continue;
      }
      if (source_seq != mark + 1) {
        ++out.gap;
        continue;
      }
      auto r = writer_->append(tx, std::move(e->row), e->payload, now);
      if (!r) return r.err();
      mark = source_seq;
      ++out.stored;
    }
    auto cp = writer_->checkpoint_if_due(tx, now);
    if (!cp) return cp.err();
    return {};
  });
  if (!done) {
    writer_->rolled_back();
    writer_.reset();  // re-read the committed tail before the next batch
    return done.err();
  }
  // The anchor file; when it fails the database holds the checkpoint and the
  // append is retried at the next commit. The batch is stored either way.
  auto filed = writer_->committed();
  if (!filed)
    std::fprintf(stderr, "audit: anchor file %s: %s (retried at the next commit)\n", opt_.anchor_path.c_str(),
                 filed.err().to_string().c_str());
  std::lock_guard lock(mu_);
  watermarks_ = std::move(marks);
  last_seq_ = writer_->committed_tail().last_seq;
  anchored_ = writer_->anchored_seq();
  return out;
}

result<bool> audit_log::tick(bool force) {
  if (auto mono = std::chrono::steady_clock::now(); mono >= next_purge_) {
    next_purge_ = mono + std::chrono::hours(1);
    auto purged = keys_->purge_expired(opt_.clock());
    if (!purged)
      std::fprintf(stderr, "audit: purging expired day keys: %s\n", purged.err().to_string().c_str());
    else if (!purged->empty() && opt_.on_purge)
      opt_.on_purge(*purged);
  }
  if (!writer_)
    if (auto st = load(); !st) return st.err();
  bool made = false;
  auto done = db_->with_transaction([&](store::transaction& tx) -> status {
    auto cp = writer_->checkpoint_if_due(tx, opt_.clock(), force);
    if (!cp) return cp.err();
    made = cp->has_value();
    return {};
  });
  if (!done) {
    writer_->rolled_back();
    writer_.reset();
    return done.err();
  }
  auto filed = writer_->committed();
  {
    std::lock_guard lock(mu_);
    anchored_ = writer_->anchored_seq();
  }
  if (!filed) return filed.err();
  return made;
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

std::uint64_t audit_log::anchored() const {
  std::lock_guard lock(mu_);
  return anchored_;
}

namespace {

// WHERE clause over the columns both tables share.
struct where_clause {
  std::string sql;
  std::vector<value> params;
  void add(const std::string& cond_with_placeholder, value v) {
    params.push_back(std::move(v));
    std::string cond = cond_with_placeholder;
    cond.replace(cond.find('?'), 1, "$" + std::to_string(params.size()));
    sql += (sql.empty() ? " WHERE " : " AND ") + cond;
  }
};

where_clause common_filter(const event_filter& f) {
  where_clause w;
  if (!f.source.empty()) {
    w.add("source = ?", f.source);
    w.add("source_seq > ?", i64(f.after_source_seq));
  }
  if (!f.request_id.empty()) w.add("request_id = ?", f.request_id);
  if (!f.job_id.empty()) w.add("job_id = ?", f.job_id);
  return w;
}

std::string text_at(const store::row& r, std::size_t i) {
  auto t = r.get_text(i);
  return t.ok() ? *t : std::string();
}
std::int64_t int_at(const store::row& r, std::size_t i) {
  auto v = r.get_i64(i);
  return v.ok() ? *v : 0;
}

}  // namespace

result<std::vector<std::string>> query_events(store::transaction& tx, auditchain::keyring& keys,
                                              const event_filter& f, std::uint32_t limit) {
  std::vector<std::string> out;
  // v1 rows: before the chain, in their own seq order. Not when asking for
  // chain positions or the newest rows (the chain holds every recent one),
  // nor for a tenant (they name none: admins only).
  if (f.after_seq == 0 && !f.newest && !f.tenant) {
    auto w = common_filter(f);
    auto rows = tx.query(std::string("SELECT ") + v1_cols + " FROM audit_events_v1" + w.sql + " ORDER BY seq LIMIT " +
                             std::to_string(limit),
                         w.params);
    if (!rows) return rows.err();
    for (const auto& r : *rows) {
      auditchain::chain_row e;  // seq stays 0: v1 rows are not chained
      e.source = text_at(r, 0);
      e.source_seq = static_cast<std::uint64_t>(int_at(r, 1));
      e.unix_ns = int_at(r, 2);
      e.principal = text_at(r, 3);
      e.role = text_at(r, 4);
      e.zone = text_at(r, 5);
      e.action = text_at(r, 6);
      e.job_id = text_at(r, 7);
      e.request_id = text_at(r, 8);
      e.decision = static_cast<std::int32_t>(int_at(r, 9));
      e.reason = text_at(r, 10);
      std::string payload;
      if (!r.is_null(11))
        if (auto b = r.get_blob(11)) payload = b->bytes;
      e.service = text_at(r, 12);
      e.peer_key = text_at(r, 13);
      out.push_back(event_to_wire(e, payload, "v1 (stored before encryption at rest)"));
    }
  }
  if (out.size() >= limit) return out;
  auto w = common_filter(f);
  if (f.after_seq > 0) w.add("seq > ?", i64(f.after_seq));
  if (f.tenant) w.add("tenant = ?", *f.tenant);
  std::string sql = "SELECT seq FROM audit_events" + w.sql + (f.newest ? " ORDER BY seq DESC" : " ORDER BY seq") +
                    " LIMIT " + std::to_string(limit - out.size());
  auto seqs = tx.query(sql, w.params);
  if (!seqs) return seqs.err();
  std::vector<std::uint64_t> wanted;
  for (const auto& r : *seqs) wanted.push_back(static_cast<std::uint64_t>(int_at(r, 0)));
  std::sort(wanted.begin(), wanted.end());
  // Whole rows through the chain reader (one decoder for the table), in runs
  // of consecutive seqs.
  for (std::size_t i = 0; i < wanted.size();) {
    std::size_t j = i + 1;
    while (j < wanted.size() && wanted[j] == wanted[j - 1] + 1) ++j;
    auto rows = auditchain::read_rows(tx, wanted[i], j - i);
    if (!rows) return rows.err();
    for (const auto& r : *rows) {
      auto plain = keys.unseal(r.payload, auditchain::context_of(r));
      out.push_back(plain ? event_to_wire(r, *plain, "") : event_to_wire(r, "", plain.err().message));
    }
    i = j;
  }
  return out;
}

}  // namespace loom::audit_service
