#include "libs/cdc/protocol.hpp"

#include "libs/crypto/encoding.hpp"

#include "loom/v1/sync.pb.h"

#include <climits>
#include <cstring>

namespace loom::cdc {
namespace {

std::string hex(const crypto::digest& d) { return crypto::to_hex(crypto::as_view(d)); }

bool digest_from(const std::string& bytes, crypto::digest& out) {
  if (bytes.size() != out.size()) return false;
  std::memcpy(out.data(), bytes.data(), out.size());
  return true;
}

// Never throws: a bad frame (or one too big to allocate) is just false.
template <class M>
bool parse(M& m, std::string_view bytes) {
  try {
    return bytes.size() <= static_cast<std::size_t>(INT_MAX) &&
           m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  } catch (const std::exception&) {
    return false;
  }
}

// `what` names the request the way errors always have ("ChunksRequest").
template <class M>
status parse_request(M& m, std::string_view body, std::string_view what) {
  if (parse(m, body)) return {};
  return make_error(errc::invalid_argument, "malformed " + std::string(what) + ": not a valid " +
                                                M::descriptor()->full_name() + " (" + std::to_string(body.size()) +
                                                " bytes)");
}

void put_status(const status& s, v1::Status* out) {
  out->set_code(static_cast<v1::Code>(s.code()));
  if (!s.ok()) out->set_message(s.err().message);
}

status status_from(const v1::Status& s) {
  if (s.code() == v1::OK) return {};
  const errc code = v1::Code_IsValid(s.code()) ? static_cast<errc>(s.code()) : errc::internal;
  return make_error(code, s.message());
}

// A reply parsed, its status present and ok; else the carried error.
template <class M>
status parse_reply(M& m, std::string_view bytes) {
  const std::string& name = M::descriptor()->full_name();
  if (!parse(m, bytes))
    return make_error(errc::invalid_argument,
                      "malformed " + name + " reply (" + std::to_string(bytes.size()) + " bytes)");
  if (!m.has_status()) return make_error(errc::invalid_argument, name + " reply without a status");
  return status_from(m.status());
}

template <class M>
std::string failed(const error& e) {
  M m;
  put_status(e, m.mutable_status());
  return m.SerializeAsString();
}

void put_entry(const file_entry& f, bool with_chunks, v1::SyncFileEntry* e) {
  e->set_path(f.path);
  e->set_size(f.size);
  e->set_root(std::string(crypto::as_view(f.root)));
  e->set_chunk_count(f.chunk_count);
  if (!with_chunks) return;
  e->mutable_chunks()->Reserve(static_cast<int>(f.chunks.size()));
  for (const auto& c : f.chunks) {
    auto* pc = e->add_chunks();
    pc->set_length(c.length);
    pc->set_sha256(std::string(crypto::as_view(c.sha256)));
  }
}

// The entry as sent, offsets rebuilt from the lengths; not yet checked
// (check_file_entry / check_manifest do that).
result<file_entry> entry_from(const v1::SyncFileEntry& e) {
  file_entry f;
  f.path = e.path();
  f.size = e.size();
  f.chunk_count = e.chunk_count();
  if (!digest_from(e.root(), f.root)) return make_error(errc::corruption, "bad root of " + f.path);
  f.chunks.reserve(static_cast<std::size_t>(e.chunks_size()));
  std::uint64_t off = 0;
  for (const auto& c : e.chunks()) {
    chunk ch{off, c.length(), {}};
    if (!digest_from(c.sha256(), ch.sha256))
      return make_error(errc::corruption,
                        "chunk list of " + f.path + " is not contiguous, has a chunk over 64 MiB or a bad hash");
    off += c.length();
    f.chunks.push_back(ch);
  }
  return f;
}

}  // namespace

status valid_dataset_name(std::string_view name) {
  if (name.empty() || name.size() > 128 || name.front() == '.' ||
      name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
          std::string_view::npos)
    return make_error(errc::invalid_argument, "dataset name \"" + std::string(name.substr(0, 128)) +
                                                  "\": want 1..128 of [A-Za-z0-9._-], not starting with '.'");
  return {};
}

status valid_tenant_name(std::string_view tenant) {
  if (tenant.size() > 128 ||
      tenant.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@:+-") !=
          std::string_view::npos)
    return make_error(errc::invalid_argument, "tenant \"" + std::string(tenant.substr(0, 128)) +
                                                  "\": want 0..128 of [A-Za-z0-9._@:+-]");
  return {};
}

std::string pack_name(const std::vector<crypto::digest>& chunks) {
  crypto::sha256_stream h;
  for (const auto& c : chunks) h.update(crypto::as_view(c));
  return "pack-" + hex(h.finish()).substr(0, 40);
}

// ---- client side -------------------------------------------------------------

std::string encode(const manifest_request& m) {
  v1::SyncManifestRequest r;
  r.set_dataset(m.dataset);
  r.set_tenant(m.tenant);
  return r.SerializeAsString();
}

std::string encode(const chunks_request& m) {
  v1::SyncChunksRequest r;
  r.set_dataset(m.dataset);
  r.set_root(std::string(crypto::as_view(m.root)));
  for (const auto& p : m.paths) r.add_paths(p);
  r.set_tenant(m.tenant);
  return r.SerializeAsString();
}

std::string encode(const pack_request& m) {
  v1::SyncPackRequest r;
  r.set_dataset(m.dataset);
  r.set_name(m.name);
  r.mutable_chunks()->Reserve(static_cast<int>(m.chunks.size()));
  for (const auto& c : m.chunks) r.add_chunks(std::string(crypto::as_view(c)));
  r.set_tenant(m.tenant);
  return r.SerializeAsString();
}

std::string encode_bye() { return v1::SyncBye().SerializeAsString(); }

result<manifest> decode_manifest(std::string_view reply, const std::string& origin, const std::string& tenant) {
  v1::SyncManifest r;
  if (auto s = parse_reply(r, reply); !s.ok()) return s.err();
  if (r.tenant() != tenant)
    return make_error(errc::invalid_argument, origin + ": a summary of tenant \"" + r.tenant().substr(0, 128) +
                                                  "\", asked for tenant \"" + tenant + "\"");
  manifest m;
  m.chunking = {r.chunking().min_size(), r.chunking().avg_size(), r.chunking().max_size()};
  if (!digest_from(r.root(), m.root)) return make_error(errc::corruption, origin + ": bad root");
  m.files.reserve(static_cast<std::size_t>(r.files_size()));
  for (const auto& e : r.files()) {
    auto f = entry_from(e);
    if (!f.ok()) return make_error(errc::corruption, origin + ": " + f.err().message);
    m.files.push_back(std::move(*f));
  }
  if (auto s = check_manifest(m, origin); !s.ok()) return s.err();
  return m;
}

result<std::vector<file_entry>> decode_chunks(std::string_view reply, const std::vector<std::string>& paths,
                                              const std::string& origin) {
  v1::SyncChunks r;
  if (auto s = parse_reply(r, reply); !s.ok()) return s.err();
  if (static_cast<std::size_t>(r.files_size()) != paths.size())
    return make_error(errc::invalid_argument, "Chunks reply: want " + std::to_string(paths.size()) +
                                                  " chunk lists, got " + std::to_string(r.files_size()));
  for (std::size_t k = 0; k < paths.size(); ++k)
    if (r.files(static_cast<int>(k)).path() != paths[k])
      return make_error(errc::invalid_argument,
                        "Chunks reply: chunk list " + std::to_string(k) + " is not of " + paths[k]);
  std::vector<file_entry> out;
  out.reserve(paths.size());
  for (const auto& e : r.files()) {
    auto f = entry_from(e);
    if (f.ok())
      if (auto s = check_file_entry(*f, true); !s.ok()) f = s.err();
    if (!f.ok()) return make_error(errc::corruption, origin + ": " + f.err().message);
    out.push_back(std::move(*f));
  }
  return out;
}

result<pack_done> decode_pack_done(std::string_view reply) {
  v1::SyncPackDone r;
  if (auto s = parse_reply(r, reply); !s.ok()) return s.err();
  if (!r.has_bulk()) return make_error(errc::invalid_argument, "PackDone reply without its bulk stats");
  const auto& b = r.bulk();
  pack_done m;
  m.name = r.name();
  m.bulk.chunks_sent = b.chunks_sent();
  m.bulk.chunks_resent = b.chunks_resent();
  m.bulk.bytes_sent = b.bytes_sent();
  m.bulk.chunks_skipped = b.chunks_skipped();
  m.bulk.complete = b.complete();
  return m;
}

status decode_status(std::string_view frame) {
  v1::Status s;
  if (!parse(s, frame))
    return make_error(errc::invalid_argument, "malformed status (" + std::to_string(frame.size()) + " bytes)");
  return status_from(s);
}

// ---- server side -------------------------------------------------------------

result<manifest_request> decode_manifest_request(std::string_view body) {
  v1::SyncManifestRequest r;
  if (auto s = parse_request(r, body, "ManifestRequest"); !s.ok()) return s.err();
  manifest_request m{r.dataset(), r.tenant()};
  if (auto s = valid_dataset_name(m.dataset); !s.ok()) return s.err();
  if (auto s = valid_tenant_name(m.tenant); !s.ok()) return s.err();
  return m;
}

result<chunks_request> decode_chunks_request(std::string_view body) {
  v1::SyncChunksRequest r;
  if (auto s = parse_request(r, body, "ChunksRequest"); !s.ok()) return s.err();
  chunks_request m{r.dataset(), {}, {}, r.tenant()};
  if (auto s = valid_dataset_name(m.dataset); !s.ok()) return s.err();
  if (auto s = valid_tenant_name(m.tenant); !s.ok()) return s.err();
  if (!digest_from(r.root(), m.root))
    return make_error(errc::invalid_argument, "malformed ChunksRequest: root is not a 32-byte sha256");
  if (static_cast<std::size_t>(r.paths_size()) > max_paths_per_request)
    return make_error(errc::invalid_argument, "ChunksRequest: more than 1024 paths");
  m.paths.assign(r.paths().begin(), r.paths().end());
  for (const auto& p : m.paths)
    if (auto s = valid_relative_path(p); !s.ok()) return s.err();
  return m;
}

result<pack_request> decode_pack_request(std::string_view body) {
  v1::SyncPackRequest r;
  if (auto s = parse_request(r, body, "PackRequest"); !s.ok()) return s.err();
  pack_request m{r.dataset(), r.name(), {}, r.tenant()};
  if (auto s = valid_dataset_name(m.dataset); !s.ok()) return s.err();
  if (auto s = valid_tenant_name(m.tenant); !s.ok()) return s.err();
  if (r.chunks_size() == 0 || static_cast<std::size_t>(r.chunks_size()) > max_pack_chunks)
    return make_error(errc::invalid_argument, "PackRequest: want 1..4096 chunk ids");
  m.chunks.resize(static_cast<std::size_t>(r.chunks_size()));
  for (int i = 0; i < r.chunks_size(); ++i)
    if (!digest_from(r.chunks(i), m.chunks[static_cast<std::size_t>(i)]))
      return make_error(errc::invalid_argument,
                        "malformed PackRequest: chunk id " + std::to_string(i) + " is not a 32-byte sha256");
  if (m.name != pack_name(m.chunks))
    return make_error(errc::invalid_argument, "PackRequest: name does not match the chunk list");
  return m;
}

std::string encode_summary(const manifest& m, const std::string& tenant) {
  v1::SyncManifest r;
  put_status({}, r.mutable_status());
  auto* c = r.mutable_chunking();
  c->set_min_size(m.chunking.min_size);
  c->set_avg_size(m.chunking.avg_size);
  c->set_max_size(m.chunking.max_size);
  r.set_root(std::string(crypto::as_view(m.root)));
  r.mutable_files()->Reserve(static_cast<int>(m.files.size()));
  for (const auto& f : m.files) put_entry(f, false, r.add_files());
  r.set_tenant(tenant);
  return r.SerializeAsString();
}

std::string encode_chunks(const std::vector<const file_entry*>& files) {
  v1::SyncChunks r;
  put_status({}, r.mutable_status());
  r.mutable_files()->Reserve(static_cast<int>(files.size()));
  for (const file_entry* f : files) put_entry(*f, true, r.add_files());
  return r.SerializeAsString();
}

std::string encode(const status& s, const pack_done& m) {
  v1::SyncPackDone r;
  put_status(s, r.mutable_status());
  r.set_name(m.name);
  auto* b = r.mutable_bulk();
  b->set_chunks_sent(m.bulk.chunks_sent);
  b->set_chunks_resent(m.bulk.chunks_resent);
  b->set_bytes_sent(m.bulk.bytes_sent);
  b->set_chunks_skipped(m.bulk.chunks_skipped);
  b->set_complete(m.bulk.complete);
  return r.SerializeAsString();
}

std::string encode_failure(std::string_view type, const error& e) {
  if (type == manifest_reply_type) return failed<v1::SyncManifest>(e);
  if (type == chunks_reply_type) return failed<v1::SyncChunks>(e);
  if (type == pack_done_type) return failed<v1::SyncPackDone>(e);
  return encode_status(e);  // error_reply_type
}

std::string encode_status(const status& s) {
  v1::Status r;
  put_status(s, &r);
  return r.SerializeAsString();
}

}  // namespace loom::cdc
