#include "libs/cdc/protocol.hpp"

#include "libs/cdc/manifest.hpp"
#include "libs/crypto/encoding.hpp"

#include <nlohmann/json.hpp>

#include <cstring>

namespace loom::cdc {
namespace {

using json = nlohmann::json;

std::string hex(const crypto::digest& d) { return crypto::to_hex(crypto::as_view(d)); }

crypto::digest digest_from(const json& j) {
  auto raw = crypto::from_hex(j.get<std::string>());
  if (!raw.ok() || raw->size() != 32) throw std::invalid_argument("not a 64-digit hex sha256");
  crypto::digest d{};
  std::memcpy(d.data(), raw->data(), d.size());
  return d;
}

// Runs `f` on the parsed object; any parse or type error -> invalid_argument.
template <class T, class F>
result<T> decode(std::string_view text, std::string_view what, F&& f) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) throw std::invalid_argument("not an object");
    return f(j);
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument, "malformed " + std::string(what) + ": " + e.what());
  }
}

json status_json(const status& s) {
  if (s.ok()) return json{{"code", "ok"}, {"message", ""}};
  return json{{"code", std::string(to_string(s.code()))}, {"message", s.err().message}};
}

status status_from(const json& j) {
  auto name = j.at("code").get<std::string>();
  if (name == "ok") return {};
  auto code = errc_from_string(name);
  return make_error(code.value_or(errc::internal), j.at("message").get<std::string>());
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

std::string pack_name(const std::vector<crypto::digest>& chunks) {
  crypto::sha256_stream h;
  for (const auto& c : chunks) h.update(crypto::as_view(c));
  return "pack-" + hex(h.finish()).substr(0, 40);
}

std::string encode(const manifest_request& m) { return json{{"dataset", m.dataset}}.dump(); }

std::string encode(const chunks_request& m) {
  return json{{"dataset", m.dataset}, {"root", hex(m.root)}, {"paths", m.paths}}.dump();
}

std::string encode(const pack_request& m) {
  json ids = json::array();
  for (const auto& c : m.chunks) ids.push_back(hex(c));
  return json{{"dataset", m.dataset}, {"name", m.name}, {"chunks", std::move(ids)}}.dump();
}

std::string encode_status(const status& s) { return status_json(s).dump(); }

std::string encode(const status& s, const pack_done& m) {
  json j = status_json(s);
  j["name"] = m.name;
  j["bulk"] = {{"chunks_sent", m.bulk.chunks_sent},
               {"chunks_resent", m.bulk.chunks_resent},
               {"bytes_sent", m.bulk.bytes_sent},
               {"chunks_skipped", m.bulk.chunks_skipped},
               {"complete", m.bulk.complete}};
  return j.dump();
}

result<manifest_request> decode_manifest_request(std::string_view text) {
  return decode<manifest_request>(text, "ManifestRequest", [](const json& j) -> result<manifest_request> {
    manifest_request m{j.at("dataset").get<std::string>()};
    if (auto s = valid_dataset_name(m.dataset); !s.ok()) return s.err();
    return m;
  });
}

result<chunks_request> decode_chunks_request(std::string_view text) {
  return decode<chunks_request>(text, "ChunksRequest", [](const json& j) -> result<chunks_request> {
    chunks_request m{j.at("dataset").get<std::string>(), digest_from(j.at("root")),
                     j.at("paths").get<std::vector<std::string>>()};
    if (auto s = valid_dataset_name(m.dataset); !s.ok()) return s.err();
    if (m.paths.size() > max_paths_per_request)
      return make_error(errc::invalid_argument, "ChunksRequest: more than 1024 paths");
    for (const auto& p : m.paths)
      if (auto s = valid_relative_path(p); !s.ok()) return s.err();
    return m;
  });
}

result<pack_request> decode_pack_request(std::string_view text) {
  return decode<pack_request>(text, "PackRequest", [](const json& j) -> result<pack_request> {
    pack_request m{j.at("dataset").get<std::string>(), j.at("name").get<std::string>(), {}};
    if (auto s = valid_dataset_name(m.dataset); !s.ok()) return s.err();
    const json& ids = j.at("chunks");
    if (!ids.is_array() || ids.empty() || ids.size() > max_pack_chunks)
      return make_error(errc::invalid_argument, "PackRequest: want 1..4096 chunk ids");
    for (const auto& id : ids) m.chunks.push_back(digest_from(id));
    if (m.name != pack_name(m.chunks))
      return make_error(errc::invalid_argument, "PackRequest: name does not match the chunk list");
    return m;
  });
}

status decode_status(std::string_view text) {
  auto r = decode<bool>(text, "status", [](const json& j) -> result<bool> {
    if (auto s = status_from(j); !s.ok()) return s.err();
    return true;
  });
  if (r.ok()) return {};
  return r.err();
}

result<pack_done> decode_pack_done(std::string_view text) {
  return decode<pack_done>(text, "PackDone", [](const json& j) -> result<pack_done> {
    if (auto s = status_from(j); !s.ok()) return s.err();
    pack_done m;
    m.name = j.at("name").get<std::string>();
    const json& b = j.at("bulk");
    m.bulk.chunks_sent = b.at("chunks_sent").get<std::uint64_t>();
    m.bulk.chunks_resent = b.at("chunks_resent").get<std::uint64_t>();
    m.bulk.bytes_sent = b.at("bytes_sent").get<std::uint64_t>();
    m.bulk.chunks_skipped = b.at("chunks_skipped").get<std::uint64_t>();
    m.bulk.complete = b.at("complete").get<bool>();
    return m;
  });
}

}  // namespace loom::cdc
