#include "services/ingest/importer/rejects.hpp"

#include "libs/atrest/object.hpp"

#include <nlohmann/json.hpp>


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

result<rejects_writer> rejects_writer::create(const std::string& path, std::shared_ptr<atrest::kek_store> seal) {
  auto o = out_stream::create(path, std::size_t{256} << 10, std::move(seal));
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
  std::uint64_t n = 0, at = 0;
  bool stopped = false;
  status bad_line;
  // One line: false once the walk should stop (limit, fn said so, a bad entry).
  auto take = [&](const std::string& line) {
    ++at;
    if (line.empty()) return true;
    auto j = json::parse(line, nullptr, false);
    auto bad = [&] {
      bad_line = make_error(errc::corruption, path + ":" + std::to_string(at) + ": not a reject entry");
      return false;
    };
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
    return fn(std::move(e)) && (limit == 0 || n < limit);
  };
  std::string partial;
  auto st = atrest::read_object_stream(path, [&](std::string_view piece) -> status {
    while (!piece.empty()) {
      const auto nl = piece.find('\n');
      if (nl == std::string_view::npos) {
        partial.append(piece);
        break;
      }
      partial.append(piece.substr(0, nl));
      piece.remove_prefix(nl + 1);
      if (!take(partial)) {
        stopped = true;  // ends the stream early: enough read, or a bad entry
        return make_error(errc::unavailable, "stopped");
      }
      partial.clear();
    }
    return {};
  });
  if (!st && !stopped) {
    if (st.code() == errc::not_found && st.err().message.starts_with("open "))
      return make_error(errc::not_found, "rejects file " + path + " cannot be opened");
    return st.err();
  }
  if (st && !partial.empty()) (void)take(partial);  // a last line without '\n'
  return bad_line;
}

}  // namespace loom::ingest
