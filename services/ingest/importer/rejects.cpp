#include "services/ingest/importer/rejects.hpp"

#include <nlohmann/json.hpp>

#include <fstream>

namespace loom::ingest {
namespace {

using json = nlohmann::ordered_json;

constexpr std::size_t max_detail = 512;  // a reason, not a copy of the document

// Cuts at a UTF-8 character boundary so the cut does not add a replacement.
std::string_view clip(std::string_view s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

result<rejects_writer> rejects_writer::create(const std::string& path) {
  auto o = out_stream::create(path, std::size_t{256} << 10);
  if (!o) return o.err();
  return rejects_writer(std::move(*o));
}

status rejects_writer::add(std::string_view stage, std::string_view rule, std::string_view file, std::uint64_t line,
                           std::string_view detail) {
  json j;
  j["seq"] = ++seq_;
  j["stage"] = stage;
  j["rule"] = rule;
  j["file"] = file;
  j["line"] = line;
  j["detail"] = clip(detail, max_detail);
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  s += '\n';
  return out_.write(s);
}

status rejects_writer::close() { return out_.close(true); }

status read_rejects(const std::string& path, std::uint64_t limit, const std::function<bool(reject_entry&&)>& fn) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::not_found, "rejects file " + path + " cannot be opened");
  std::string line;
  std::uint64_t n = 0, at = 0;
  while ((limit == 0 || n < limit) && std::getline(in, line)) {
    ++at;
    if (line.empty()) continue;
    auto j = json::parse(line, nullptr, false);
    auto bad = [&] { return make_error(errc::corruption, path + ":" + std::to_string(at) + ": not a reject entry"); };
    if (!j.is_object()) return bad();
    reject_entry e;
    try {
      e.seq = j.at("seq").get<std::uint64_t>();
      e.stage = j.at("stage").get<std::string>();
      e.rule = j.at("rule").get<std::string>();
      e.file = j.at("file").get<std::string>();
      e.line = j.at("line").get<std::uint64_t>();
      e.detail = j.at("detail").get<std::string>();
    } catch (const json::exception&) {
      return bad();
    }
    ++n;
    if (!fn(std::move(e))) break;
  }
  if (in.bad()) return make_error(errc::internal, "read " + path + " failed");
  return ok_status();
}

}  // namespace loom::ingest
