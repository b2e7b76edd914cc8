#include "libs/auditchain/archive.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace loom::auditchain {
namespace {

using nlohmann::json;

// A JSON string when the bytes are UTF-8 (what every service writes), else
// {"hex": ...}: the archive keeps the exact bytes the row hash covers.
json text(const std::string& s) {
  try {
    (void)json(s).dump();
    return s;
  } catch (const json::exception&) {
    return json{{"hex", crypto::to_hex(s)}};
  }
}

// Field readers: false when missing or of another type.
bool get_text(const json& j, const char* k, std::string& out) {
  auto it = j.find(k);
  if (it == j.end()) return false;
  if (it->is_string()) return out = it->get<std::string>(), true;
  if (it->is_object() && it->contains("hex") && (*it)["hex"].is_string()) {
    auto b = crypto::from_hex((*it)["hex"].get<std::string>());
    if (!b) return false;
    return out = *b, true;
  }
  return false;
}
template <class T>
bool get_int(const json& j, const char* k, T& out) {
  auto it = j.find(k);
  if (it == j.end() || !it->is_number_integer()) return false;
  out = it->get<T>();
  return true;
}
bool get_hash(const json& j, const char* k, hash32& out) {
  auto it = j.find(k);
  if (it == j.end() || !it->is_string()) return false;
  auto b = crypto::from_hex(it->get<std::string>());
  if (!b) return false;
  auto h = hash_from_bytes(*b);
  if (!h) return false;
  return out = *h, true;
}

json row_json(const chain_row& r) {
  return json{{"seq", r.seq},
              {"unix_ns", r.unix_ns},
              {"source", text(r.source)},
              {"source_seq", r.source_seq},
              {"service", text(r.service)},
              {"peer_key", text(r.peer_key)},
              {"principal", text(r.principal)},
              {"role", text(r.role)},
              {"zone", text(r.zone)},
              {"action", text(r.action)},
              {"job_id", text(r.job_id)},
              {"request_id", text(r.request_id)},
              {"decision", r.decision},
              {"reason", text(r.reason)},
              {"payload", crypto::to_hex(r.payload)},
              {"tenant", text(r.tenant)},
              {"version", r.version},
              {"prev_hash", to_hex(r.prev_hash)},
              {"row_hash", to_hex(r.row_hash)}};
}

// The name of the first field missing or mistyped, or nullptr.
const char* row_from_json(const json& j, chain_row& r) {
  if (!get_int(j, "seq", r.seq)) return "seq";
  if (!get_int(j, "unix_ns", r.unix_ns)) return "unix_ns";
  if (!get_text(j, "source", r.source)) return "source";
  if (!get_int(j, "source_seq", r.source_seq)) return "source_seq";
  if (!get_text(j, "service", r.service)) return "service";
  if (!get_text(j, "peer_key", r.peer_key)) return "peer_key";
  if (!get_text(j, "principal", r.principal)) return "principal";
  if (!get_text(j, "role", r.role)) return "role";
  if (!get_text(j, "zone", r.zone)) return "zone";
  if (!get_text(j, "action", r.action)) return "action";
  if (!get_text(j, "job_id", r.job_id)) return "job_id";
  if (!get_text(j, "request_id", r.request_id)) return "request_id";
  if (!get_int(j, "decision", r.decision)) return "decision";
  if (!get_text(j, "reason", r.reason)) return "reason";
  std::string hex;
  if (!get_text(j, "payload", hex)) return "payload";
  auto p = crypto::from_hex(hex);
  if (!p) return "payload";
  r.payload = std::move(*p);
  if (!get_text(j, "tenant", r.tenant)) return "tenant";
  if (!get_int(j, "version", r.version)) return "version";
  if (!get_hash(j, "prev_hash", r.prev_hash)) return "prev_hash";
  if (!get_hash(j, "row_hash", r.row_hash)) return "row_hash";
  return nullptr;
}

}  // namespace

std::string archive_file_name(std::uint64_t first_seq, std::uint64_t last_seq, std::int64_t created_ns) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "audit-%020llu-%020llu-%lld.jsonl", static_cast<unsigned long long>(first_seq),
                static_cast<unsigned long long>(last_seq), static_cast<long long>(created_ns));
  return buf;
}

result<archive_entry> write_archive(const std::string& dir, std::span<const chain_row> rows,
                                    std::span<const checkpoint> checkpoints, std::int64_t created_ns) {
  if (rows.empty()) return make_error(errc::invalid_argument, "an archive needs at least one row");
  archive_entry e;
  e.first_seq = rows.front().seq;
  e.last_seq = rows.back().seq;
  e.rows = rows.size();
  e.prev_hash = rows.front().prev_hash;
  e.last_hash = rows.back().row_hash;
  e.oldest_ns = rows.front().unix_ns;
  e.newest_ns = rows.front().unix_ns;
  e.created_ns = created_ns;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && (rows[i].seq != rows[i - 1].seq + 1 || rows[i].prev_hash != rows[i - 1].row_hash))
      return make_error(errc::invalid_argument, "archive rows are not one linked run at seq " +
                                                    std::to_string(rows[i].seq));
    e.oldest_ns = std::min(e.oldest_ns, rows[i].unix_ns);
    e.newest_ns = std::max(e.newest_ns, rows[i].unix_ns);
  }
  e.file = archive_file_name(e.first_seq, e.last_seq, created_ns);
  if (std::filesystem::exists(dir + "/" + e.file))
    return make_error(errc::already_exists, dir + "/" + e.file + " exists: an archive is never written over");
  std::string out = json{{"format", archive_format},
                         {"first_seq", e.first_seq},
                         {"last_seq", e.last_seq},
                         {"rows", e.rows},
                         {"prev_hash", to_hex(e.prev_hash)},
                         {"last_hash", to_hex(e.last_hash)},
                         {"oldest_ns", e.oldest_ns},
                         {"newest_ns", e.newest_ns},
                         {"created_ns", e.created_ns}}
                        .dump() +
                    "\n";
  for (const auto& r : rows) out += json{{"row", row_json(r)}}.dump() + "\n";
  for (const auto& c : checkpoints)
    out += json{{"checkpoint",
                 {{"seq", c.seq},
                  {"row_hash", to_hex(c.row_hash)},
                  {"unix_ns", c.unix_ns},
                  {"key_id", text(c.key_id)},
                  {"signature", crypto::to_hex(c.signature)}}}}
               .dump() +
           "\n";
  if (auto st = files::make_dirs(dir, 0700); !st) return st.err();
  if (auto st = files::write_atomic(dir + "/" + e.file, out, 0600); !st) return st.err();
  e.sha256 = crypto::sha256_hex(out);
  return e;
}

result<archive_contents> read_archive(const std::string& path) {
  auto data = files::read_file(path);
  if (!data) return data.err();
  archive_contents a;
  a.header.file = path.substr(path.find_last_of('/') + 1);
  a.header.sha256 = crypto::sha256_hex(*data);
  std::size_t line_no = 0, pos = 0;
  auto bad = [&](const std::string& why) {
    return make_error(errc::corruption, "audit archive " + path + " line " + std::to_string(line_no) + ": " + why);
  };
  bool header = false;
  while (pos < data->size()) {
    auto end = data->find('\n', pos);
    if (end == std::string::npos) return ++line_no, bad("the file ends in a torn line (no newline)");
    std::string_view line(data->data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    if (!header) {
      std::string format;
      if (!get_text(j, "format", format) || format != archive_format)
        return bad("not a loom audit archive (format is not " + std::string(archive_format) + ")");
      auto& h = a.header;
      if (!get_int(j, "first_seq", h.first_seq) || !get_int(j, "last_seq", h.last_seq) || !get_int(j, "rows", h.rows) ||
          !get_hash(j, "prev_hash", h.prev_hash) || !get_hash(j, "last_hash", h.last_hash) ||
          !get_int(j, "oldest_ns", h.oldest_ns) || !get_int(j, "newest_ns", h.newest_ns) ||
          !get_int(j, "created_ns", h.created_ns))
        return bad("the header lacks a field or has one of the wrong type");
      header = true;
      continue;
    }
    if (auto it = j.find("row"); it != j.end() && it->is_object()) {
      if (!a.checkpoints.empty()) return bad("a row after the checkpoints");
      chain_row r;
      if (const char* f = row_from_json(*it, r)) return bad(std::string("row field ") + f + " is missing or malformed");
      const std::uint64_t want = a.header.first_seq + a.rows.size();
      if (r.seq != want) return bad("row seq " + std::to_string(r.seq) + " where " + std::to_string(want) + " belongs");
      a.rows.push_back(std::move(r));
    } else if (auto ct = j.find("checkpoint"); ct != j.end() && ct->is_object()) {
      checkpoint c;
      std::string sig_hex;
      if (!get_int(*ct, "seq", c.seq) || !get_hash(*ct, "row_hash", c.row_hash) || !get_int(*ct, "unix_ns", c.unix_ns) ||
          !get_text(*ct, "key_id", c.key_id) || !get_text(*ct, "signature", sig_hex))
        return bad("a checkpoint lacks a field or has one of the wrong type");
      auto sig = crypto::from_hex(sig_hex);
      if (!sig) return bad("a checkpoint's signature is not hex");
      c.signature = std::move(*sig);
      a.checkpoints.push_back(std::move(c));
    } else {
      return bad("neither a row nor a checkpoint");
    }
  }
  if (!header) return ++line_no, bad("the file is empty");
  if (a.rows.size() != a.header.rows || a.rows.empty() || a.rows.back().seq != a.header.last_seq)
    return bad("the header names " + std::to_string(a.header.rows) + " rows up to seq " +
               std::to_string(a.header.last_seq) + ", the file holds " + std::to_string(a.rows.size()));
  return a;
}

}  // namespace loom::auditchain
