#include "libs/auditchain/store_io.hpp"

#include "libs/auditchain/anchor_file.hpp"
#include "libs/store/database.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <variant>

namespace loom::auditchain {
namespace {

using store::value;

constexpr const char* row_columns =
    "seq, unix_ns, source, source_seq, service, peer_key, principal, role, zone, action, job_id, request_id, "
    "decision, reason, payload, prev_hash, row_hash, tenant, row_version";

std::int64_t i64(std::uint64_t v) { return static_cast<std::int64_t>(v); }

bool get_int(const store::row& r, std::size_t i, std::int64_t& out) {
  auto* p = std::get_if<std::int64_t>(&r[i]);
  if (!p) return false;
  out = *p;
  return true;
}

bool get_bytes(const store::row& r, std::size_t i, std::string& out) {
  if (auto* s = std::get_if<std::string>(&r[i])) {
    out.assign(*s);
    return true;
  }
  if (auto* b = std::get_if<store::blob>(&r[i])) {
    out.assign(b->bytes);
    return true;
  }
  return false;
}

bool get_hash(const store::row& r, std::size_t i, hash32& out) {
  auto* b = std::get_if<store::blob>(&r[i]);
  if (!b) return false;
  auto h = hash_from_bytes(b->bytes);
  if (!h) return false;
  out = *h;
  return true;
}

// Decodes a row selected with row_columns into `out`, reusing its strings'
// capacity (the verifier's loop). Returns the name of the first bad column.
const char* decode(const store::row& r, chain_row& out) {
  std::int64_t v = 0;
  if (!get_int(r, 0, v)) return "seq";
  out.seq = static_cast<std::uint64_t>(v);
  if (!get_int(r, 1, out.unix_ns)) return "unix_ns";
  if (!get_bytes(r, 2, out.source)) return "source";
  if (!get_int(r, 3, v)) return "source_seq";
  out.source_seq = static_cast<std::uint64_t>(v);
  static const char* text_names[] = {"service", "peer_key", "principal", "role", "zone", "action", "job_id",
                                     "request_id"};
  std::string* texts[] = {&out.service, &out.peer_key, &out.principal, &out.role,
                          &out.zone,    &out.action,   &out.job_id,    &out.request_id};
  for (std::size_t k = 0; k < 8; ++k)
    if (!get_bytes(r, 4 + k, *texts[k])) return text_names[k];
  if (!get_int(r, 12, v)) return "decision";
  out.decision = static_cast<std::int32_t>(v);
  if (!get_bytes(r, 13, out.reason)) return "reason";
  if (!get_bytes(r, 14, out.payload)) return "payload";
  if (!get_hash(r, 15, out.prev_hash)) return "prev_hash";
  if (!get_hash(r, 16, out.row_hash)) return "row_hash";
  if (!get_bytes(r, 17, out.tenant)) return "tenant";
  if (!get_int(r, 18, v)) return "row_version";
  out.version = static_cast<std::int32_t>(v);
  return nullptr;
}

std::string page_sql(const tables& t, std::size_t limit) {
  return std::string("SELECT ") + row_columns + " FROM " + t.events + " WHERE seq >= $1 ORDER BY seq LIMIT " +
         std::to_string(limit);
}

}  // namespace

std::string schema_sql(store::backend engine, const tables& t) {
  const std::string key = engine == store::backend::sqlite ? "INTEGER" : "BIGINT";
  return "CREATE TABLE " + t.events + " (\n  seq " + key + R"sql( NOT NULL PRIMARY KEY,
  source TEXT NOT NULL,
  source_seq BIGINT NOT NULL,
  unix_ns BIGINT NOT NULL,
  principal TEXT NOT NULL DEFAULT '',
  role TEXT NOT NULL DEFAULT '',
  zone TEXT NOT NULL DEFAULT '',
  action TEXT NOT NULL DEFAULT '',
  job_id TEXT NOT NULL DEFAULT '',
  request_id TEXT NOT NULL DEFAULT '',
  decision INTEGER NOT NULL DEFAULT 0,
  reason TEXT NOT NULL DEFAULT '',
  payload BYTEA NOT NULL,
  service TEXT NOT NULL DEFAULT '',
  peer_key TEXT NOT NULL DEFAULT '',
  prev_hash BYTEA NOT NULL,
  row_hash BYTEA NOT NULL,
  tenant TEXT NOT NULL DEFAULT '',
  row_version INTEGER NOT NULL DEFAULT 1,
  UNIQUE (source, source_seq)
);
CREATE INDEX )sql" + t.events + "_by_job ON " + t.events + " (job_id);\nCREATE INDEX " + t.events + "_by_tenant ON " +
         t.events + " (tenant);\nCREATE TABLE " + t.checkpoints + " (\n  seq " + key + R"sql( NOT NULL PRIMARY KEY,
  row_hash BYTEA NOT NULL,
  unix_ns BIGINT NOT NULL,
  key_id TEXT NOT NULL,
  signature BYTEA NOT NULL
);
)sql";
}

status insert_row(store::transaction& tx, const chain_row& r, const tables& t) {
  if (auto s = valid_row(r); !s) return s;
  // Built one by one: GCC 12 warns falsely (-Wmaybe-uninitialized) on a
  // braced list of std::variant holding strings.
  std::vector<value> p;
  p.reserve(19);
  p.emplace_back(i64(r.seq));
  p.emplace_back(r.unix_ns);
  p.emplace_back(r.source);
  p.emplace_back(i64(r.source_seq));
  for (const std::string* s : {&r.service, &r.peer_key, &r.principal, &r.role, &r.zone, &r.action, &r.job_id,
                               &r.request_id})
    p.emplace_back(*s);
  p.emplace_back(std::int64_t{r.decision});
  p.emplace_back(r.reason);
  p.emplace_back(store::blob{r.payload});
  p.emplace_back(store::blob{std::string(as_view(r.prev_hash))});
  p.emplace_back(store::blob{std::string(as_view(r.row_hash))});
  p.emplace_back(r.tenant);
  p.emplace_back(std::int64_t{r.version});
  auto done = tx.exec("INSERT INTO " + t.events + " (" + row_columns +
                          ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, "
                          "$19)",
                      p);
  if (!done) return done.err();
  return ok_status();
}

status insert_checkpoint(store::transaction& tx, const checkpoint& c, const tables& t) {
  std::vector<value> p;
  p.reserve(5);
  p.emplace_back(i64(c.seq));
  p.emplace_back(store::blob{std::string(as_view(c.row_hash))});
  p.emplace_back(c.unix_ns);
  p.emplace_back(c.key_id);
  p.emplace_back(store::blob{c.signature});
  auto done = tx.exec("INSERT INTO " + t.checkpoints +
                          " (seq, row_hash, unix_ns, key_id, signature) VALUES ($1, $2, $3, $4, $5)",
                      p);
  if (!done) return done.err();
  return ok_status();
}

result<std::vector<chain_row>> read_rows(store::transaction& tx, std::uint64_t from_seq, std::size_t limit,
                                         const tables& t) {
  auto rows = tx.query(page_sql(t, limit), {i64(from_seq)});
  if (!rows) return rows.err();
  std::vector<chain_row> out(rows->size());
  for (std::size_t i = 0; i < rows->size(); ++i) {
    if (const char* bad = decode((*rows)[i], out[i])) {
      std::int64_t seq = 0;
      get_int((*rows)[i], 0, seq);
      return make_error(errc::corruption, t.events + " seq " + std::to_string(seq) + ": column " + bad +
                                              " is NULL or of the wrong type or size");
    }
  }
  return out;
}

result<chain_tail> read_tail(store::transaction& tx, const tables& t) {
  auto rows = tx.query("SELECT seq, row_hash FROM " + t.events + " ORDER BY seq DESC LIMIT 1");
  if (!rows) return rows.err();
  chain_tail tail;
  if (rows->empty()) return tail;
  std::int64_t seq = 0;
  if (!get_int((*rows)[0], 0, seq) || !get_hash((*rows)[0], 1, tail.last_hash))
    return make_error(errc::corruption, t.events + ": the last row's seq or row_hash is unreadable");
  tail.last_seq = static_cast<std::uint64_t>(seq);
  return tail;
}

result<std::vector<checkpoint>> read_checkpoints(store::transaction& tx, const tables& t) {
  auto rows = tx.query("SELECT seq, row_hash, unix_ns, key_id, signature FROM " + t.checkpoints + " ORDER BY seq");
  if (!rows) return rows.err();
  std::vector<checkpoint> out;
  out.reserve(rows->size());
  for (const auto& r : *rows) {
    checkpoint c;
    std::int64_t seq = 0;
    // A mangled row keeps what is readable: its signature then fails and
    // the verifier names its seq.
    get_int(r, 0, seq);
    c.seq = static_cast<std::uint64_t>(seq);
    get_hash(r, 1, c.row_hash);
    get_int(r, 2, c.unix_ns);
    get_bytes(r, 3, c.key_id);
    get_bytes(r, 4, c.signature);
    out.push_back(std::move(c));
  }
  return out;
}

result<std::vector<archive_entry>> read_archive_entries(store::transaction& tx, const tables& t) {
  auto exists = tx.kind() == store::backend::sqlite
                    ? tx.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = $1", {t.archives})
                    : tx.query("SELECT 1 FROM information_schema.tables WHERE table_name = $1 AND "
                               "table_schema = current_schema()",
                               {t.archives});
  if (!exists) return exists.err();
  std::vector<archive_entry> out;
  if (exists->empty()) return out;
  auto rows = tx.query("SELECT first_seq, last_seq, rows, prev_hash, last_hash, oldest_ns, newest_ns, created_ns, "
                       "file, sha256 FROM " + t.archives + " ORDER BY first_seq");
  if (!rows) return rows.err();
  for (const auto& r : *rows) {
    archive_entry e;
    std::int64_t first = 0, last = 0, n = 0;
    if (!get_int(r, 0, first) || !get_int(r, 1, last) || !get_int(r, 2, n) || !get_hash(r, 3, e.prev_hash) ||
        !get_hash(r, 4, e.last_hash) || !get_int(r, 5, e.oldest_ns) || !get_int(r, 6, e.newest_ns) ||
        !get_int(r, 7, e.created_ns) || !get_bytes(r, 8, e.file) || !get_bytes(r, 9, e.sha256))
      return make_error(errc::corruption, t.archives + " has a row with a NULL or mistyped column (first_seq " +
                                              std::to_string(first) + ")");
    e.first_seq = static_cast<std::uint64_t>(first);
    e.last_seq = static_cast<std::uint64_t>(last);
    e.rows = static_cast<std::uint64_t>(n);
    out.push_back(std::move(e));
  }
  return out;
}

status insert_archive_entry(store::transaction& tx, const archive_entry& e, const tables& t) {
  auto done = tx.exec("INSERT INTO " + t.archives +
                          " (first_seq, last_seq, rows, prev_hash, last_hash, oldest_ns, newest_ns, created_ns, file, "
                          "sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                      {i64(e.first_seq), i64(e.last_seq), i64(e.rows), store::blob{std::string(as_view(e.prev_hash))},
                       store::blob{std::string(as_view(e.last_hash))}, e.oldest_ns, e.newest_ns, e.created_ns, e.file,
                       e.sha256});
  if (!done) return done.err();
  return ok_status();
}

namespace {

// Feeds every archived segment's rows to `v`, file by file in seq order;
// false once the verifier has failed (an archive problem included).
bool walk_archives(chain_verifier& v, std::span<const archive_entry> entries, const std::string& dir,
                   std::size_t& files_read) {
  for (const auto& e : entries) {
    const std::string path = dir + "/" + e.file;
    auto a = read_archive(path);
    if (!a) {
      v.archive_problem(e.first_seq, a.code() == errc::not_found
                                         ? "the archive of seqs " + std::to_string(e.first_seq) + ".." +
                                               std::to_string(e.last_seq) + " (" + path + ") is missing"
                                         : a.err().message);
      return false;
    }
    if (a->header.sha256 != e.sha256) {
      v.archive_problem(e.first_seq, path + " is not the file archived: its SHA-256 is " + a->header.sha256 +
                                         ", audit_archives recorded " + e.sha256);
      return false;
    }
    if (a->header.first_seq != e.first_seq || a->header.last_seq != e.last_seq) {
      v.archive_problem(e.first_seq, path + " holds seqs " + std::to_string(a->header.first_seq) + ".." +
                                         std::to_string(a->header.last_seq) + ", audit_archives lists it for " +
                                         std::to_string(e.first_seq) + ".." + std::to_string(e.last_seq));
      return false;
    }
    for (const auto& r : a->rows)
      if (!v.feed(r)) return false;
    if (a->rows.back().row_hash != e.last_hash) {
      v.archive_problem(e.last_seq, path + ": the hash of its last row is not the one audit_archives recorded");
      return false;
    }
    ++files_read;
  }
  return true;
}

}  // namespace

result<verify_report> verify_in(store::transaction& tx, std::uint64_t from_seq, const anchor_keys& keys,
                                std::span<const checkpoint> external, const tables& names, std::size_t page_rows,
                                const std::string& archive_dir) {
  if (from_seq == 0) from_seq = 1;
  if (page_rows == 0) page_rows = 1;
  auto in_db = read_checkpoints(tx, names);
  if (!in_db) return in_db.err();
  auto archived = read_archive_entries(tx, names);
  if (!archived) return archived.err();
  const std::uint64_t archived_to = archived->empty() ? 0 : archived->back().last_seq;

  // One anchor per distinct checkpoint; identical ones from both places merge.
  std::map<std::pair<std::uint64_t, std::string>, std::pair<checkpoint, int>> merged;  // where: 1 db, 2 file
  auto add = [&](const checkpoint& c, int where) {
    std::string k = signed_message(c) + c.signature;
    auto& slot = merged[{c.seq, k}];
    slot.first = c;
    slot.second |= where;
  };
  for (const auto& c : *in_db) add(c, 1);
  for (const auto& c : external) add(c, 2);
  std::vector<anchor> anchors;
  std::size_t only_file = 0, only_db = 0;
  for (auto& [key, v] : merged) {
    anchor a;
    a.seq = v.first.seq;
    a.row_hash = v.first.row_hash;
    a.origin = v.second == 3 ? "database and anchor file" : v.second == 1 ? "database" : "anchor file";
    const bool genesis = a.seq == 0;  // anchor_genesis: in the file only, by design
    if (v.second == 1 && !genesis) ++only_db;
    if (v.second == 2 && !genesis) ++only_file;
    auto ok = keys.verify(v.first);
    a.authentic = ok.ok();
    if (!ok) a.problem = ok.err().message;
    anchors.push_back(std::move(a));
  }

  verify_report early;
  std::vector<std::string> archive_notes;
  const bool walk_files = archived_to > 0 && !archive_dir.empty() && from_seq == 1;
  if (archived_to > 0 && from_seq > 1 && from_seq <= archived_to)
    return make_error(errc::invalid_argument, "seq " + std::to_string(from_seq) + " is archived (seqs " +
                                                  std::to_string(archived->front().first_seq) + ".." +
                                                  std::to_string(archived_to) +
                                                  "): verify from the start with --archive DIR");
  hash32 start = genesis_hash;
  std::uint64_t live_from = from_seq;
  if (archived_to > 0 && from_seq == 1) live_from = archived_to + 1;
  const bool start_known = archived_to > 0 && !walk_files && (from_seq == 1 || from_seq == archived_to + 1);
  if (start_known) {
    // The live rows alone: they start from the hash recorded after the last
    // archived segment, which the next signed checkpoint proves.
    from_seq = archived_to + 1;
    start = archived->back().last_hash;
    archive_notes.push_back("seqs " + std::to_string(archived->front().first_seq) + ".." +
                            std::to_string(archived_to) + " are archived in " + std::to_string(archived->size()) +
                            " file(s) listed in " + names.archives + ", not checked here (--archive DIR checks them)");
  }
  early.from_seq = from_seq;
  early.last_seq = from_seq - 1;
  if (from_seq > 1 && !start_known) {
    auto prev = tx.query("SELECT seq, row_hash FROM " + names.events + " WHERE seq = $1", {i64(from_seq - 1)});
    if (!prev) return prev.err();
    if (prev->empty()) {
      auto tail = read_tail(tx, names);
      if (!tail) return tail.err();
      if (tail->last_seq < from_seq - 1)
        return make_error(errc::invalid_argument, "the log ends at seq " + std::to_string(tail->last_seq) +
                                                      ": nothing to verify from seq " + std::to_string(from_seq));
      early.kind = fault::gap;
      early.bad_seq = from_seq - 1;
      early.reason = "cannot start at seq " + std::to_string(from_seq) + ": seq " + std::to_string(from_seq - 1) +
                     " is missing";
      return early;
    }
    if (!get_hash((*prev)[0], 1, start)) {
      early.kind = fault::malformed;
      early.bad_seq = from_seq - 1;
      early.reason = "row_hash of seq " + std::to_string(from_seq - 1) + " is NULL or not 32 bytes";
      return early;
    }
  }

  chain_verifier v(from_seq, start, std::move(anchors));
  const std::string sql = page_sql(names, page_rows);
  chain_row row;
  std::uint64_t next = walk_files ? live_from : from_seq;
  std::size_t files_read = 0;
  if (walk_files) {
    walk_archives(v, *archived, archive_dir, files_read);
    archive_notes.push_back(std::to_string(files_read) + " of " + std::to_string(archived->size()) +
                            " archive file(s) in " + archive_dir +
                            " checked: seqs " + std::to_string(archived->front().first_seq) + ".." +
                            std::to_string(archived_to));
  }
  for (; !v.failed();) {
    auto page = tx.query(sql, {i64(next)});
    if (!page) return page.err();
    for (const auto& r : *page) {
      if (const char* bad = decode(r, row)) {
        std::int64_t seq = 0;
        get_int(r, 0, seq);
        v.malformed(static_cast<std::uint64_t>(seq),
                    std::string("column ") + bad + " is NULL or of the wrong type or size");
        break;
      }
      if (!v.feed(row)) break;
    }
    if (v.failed() || page->size() < page_rows) break;
    next = row.seq + 1;
  }
  verify_report rep = v.finish();
  if (!archive_dir.empty() && archived_to == 0) archive_notes.push_back("no archived segments in " + names.archives);
  rep.notes.insert(rep.notes.end(), archive_notes.begin(), archive_notes.end());
  if (only_file > 0)
    rep.notes.push_back(std::to_string(only_file) + " checkpoint(s) only in the anchor file, not in " +
                        names.checkpoints);
  if (only_db > 0 && !external.empty())
    rep.notes.push_back(std::to_string(only_db) + " checkpoint(s) only in " + names.checkpoints +
                        ", not in the anchor file");
  return rep;
}

result<verify_report> verify_store(store::database& db, const verify_options& o) {
  auto keys = o.keys_dir.empty() ? result<anchor_keys>(anchor_keys{}) : anchor_keys::load(o.keys_dir);
  if (!keys) return keys.err();
  std::vector<checkpoint> external;
  std::vector<std::string> notes;
  std::string anchor_problem;  // set when a trusted key exists but its anchor file cannot vouch
  const std::string key_words = std::to_string(keys->size()) + " trusted anchor key(s) in " + o.keys_dir;
  if (!o.anchor_file.empty()) {
    auto f = read_anchor_file(o.anchor_file);
    if (f.ok()) {
      external = std::move(f->checkpoints);
      if (f->torn_tail) notes.push_back("the anchor file ends in a torn line (a crash mid-append); it was skipped");
      bool vouched = false;
      for (const auto& c : external) vouched = vouched || keys->verify(c).ok();
      if (keys->size() > 0 && !vouched)
        anchor_problem = "the anchor file " + o.anchor_file + " holds no checkpoint signed by the " + key_words +
                         " (every anchor file starts with its key's genesis checkpoint): it was emptied or replaced";
    } else if (f.code() == errc::not_found) {
      if (keys->size() > 0)
        anchor_problem = "the anchor file " + o.anchor_file + " does not exist but there are " + key_words +
                         ": it was deleted or moved (--anchors FILE names another place)";
      else
        notes.push_back("no anchor file at " + o.anchor_file + ": checked against the database checkpoints only");
    } else {
      return f.err();
    }
  } else {
    notes.push_back("no anchor file given: checked against the database checkpoints only");
  }
  if (keys->size() == 0)
    notes.push_back("no trusted anchor keys" + (o.keys_dir.empty() ? std::string() : " in " + o.keys_dir) +
                    ": every checkpoint fails its signature check");
  auto rep = db.with_read_transaction([&](store::transaction& tx) {
    return verify_in(tx, o.from_seq, *keys, external, o.names, o.page_rows, o.archive_dir);
  });
  if (!rep) return rep.err();
  rep->notes.insert(rep->notes.begin(), notes.begin(), notes.end());
  if (!anchor_problem.empty()) {
    if (rep->ok()) {
      rep->kind = fault::anchor_missing;
      rep->bad_seq = rep->from_seq;
      rep->reason = anchor_problem;
    } else {
      rep->notes.push_back("also: " + anchor_problem);
    }
  }
  return rep;
}

std::string store_url(const std::string& data_dir) {
  const char* env = std::getenv("LOOM_DATABASE_URL");
  if (env != nullptr && *env != '\0') return env;
  const std::string own = data_dir + "/audit.db", shared = data_dir + "/loom.db";
  std::error_code ec;
  if (std::filesystem::exists(own, ec) || !std::filesystem::exists(shared, ec)) return own;
  auto db = store::database::open(shared);
  if (!db) return own;  // the audit service reports its own store's errors, not loom.db's
  auto has = (*db)->with_read_transaction([](store::transaction& tx) -> result<bool> {
    auto rows = tx.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_events'");
    if (!rows) return rows.err();
    return !rows->empty();
  });
  return has && *has ? shared : own;
}

}  // namespace loom::auditchain
