// JSONL reader: one JSON object per line. {"messages":[...]} is an SFT chat
// record, {"prompt","chosen","rejected"} a preference pair, anything else a
// text record whose text is reader_options::jsonl_text_field. Types are checked
// here (json_wrong_type / json_missing_field); the annotation rules (roles,
// alternation, non-empty) are annotation.hpp's, after cleaning.
#include "services/ingest/pipeline/readers/json_flat.hpp"
#include "services/ingest/pipeline/readers/line_loop.hpp"
#include "services/ingest/pipeline/utf8.hpp"

#include <nlohmann/json.hpp>

namespace loom::ingest::detail {
namespace {

using json = nlohmann::json;

struct type_error {
  reject_reason reason;
  std::string message;
};

// The string at j[key], or why not.
std::optional<type_error> take_string(json& j, const std::string& key, const std::string& where, std::string& out) {
  auto it = j.find(key);
  if (it == j.end()) return type_error{reject_reason::json_missing_field, where + key + ": missing"};
  if (!it->is_string())
    return type_error{reject_reason::json_wrong_type,
                      where + key + ": is " + std::string(it->type_name()) + ", expected a string"};
  out = std::move(it->get_ref<std::string&>());
  return std::nullopt;
}

std::optional<type_error> to_sft(json& j, document& d) {
  auto& m = j["messages"];
  if (!m.is_array())
    return type_error{reject_reason::json_wrong_type,
                      "messages: is " + std::string(m.type_name()) + ", expected an array"};
  d.messages.reserve(m.size());
  for (std::size_t i = 0; i < m.size(); ++i) {
    auto& t = m[i];
    std::string where = "messages[" + std::to_string(i) + "].";
    if (!t.is_object())
      return type_error{reject_reason::json_wrong_type,
                        where.substr(0, where.size() - 1) + ": is " + std::string(t.type_name()) + ", expected an object"};
    chat_turn turn;
    if (auto e = take_string(t, "role", where, turn.role)) return e;
    if (auto e = take_string(t, "content", where, turn.content)) return e;
    d.messages.push_back(std::move(turn));
  }
  return std::nullopt;
}

std::optional<type_error> to_preference(json& j, document& d) {
  if (auto e = take_string(j, "prompt", "", d.prompt)) return e;
  if (auto e = take_string(j, "chosen", "", d.chosen)) return e;
  if (auto e = take_string(j, "rejected", "", d.rejected)) return e;
  return std::nullopt;
}

// The fast path's version of take_string, with the same messages.
const flat_field* find_flat(const std::vector<flat_field>& fields, std::string_view key) {
  for (auto it = fields.rbegin(); it != fields.rend(); ++it)  // the last duplicate wins, as in nlohmann
    if (it->key == key) return &*it;
  return nullptr;
}

std::optional<type_error> take_flat(std::vector<flat_field>& fields, const std::string& key, std::string& out) {
  const flat_field* f = find_flat(fields, key);
  if (!f) return type_error{reject_reason::json_missing_field, key + ": missing"};
  if (f->t != flat_field::type::string)
    return type_error{reject_reason::json_wrong_type,
                      key + ": is " + std::string(type_name(f->t)) + ", expected a string"};
  out = std::move(const_cast<flat_field*>(f)->value);
  return std::nullopt;
}

// Fills `d` from a flat record; the error, if any.
std::optional<type_error> from_flat(std::vector<flat_field>& fields, const std::string& text_field, document& d) {
  if (const flat_field* m = find_flat(fields, "messages")) {
    d.kind = doc_kind::sft;
    return type_error{reject_reason::json_wrong_type,
                      "messages: is " + std::string(type_name(m->t)) + ", expected an array"};
  }
  if (find_flat(fields, "chosen") || find_flat(fields, "rejected")) {
    d.kind = doc_kind::preference;
    if (auto e = take_flat(fields, "prompt", d.prompt)) return e;
    if (auto e = take_flat(fields, "chosen", d.chosen)) return e;
    return take_flat(fields, "rejected", d.rejected);
  }
  return take_flat(fields, text_field, d.text);
}

}  // namespace

void read_jsonl(read_context& ctx, const std::string& name, byte_source& src) {
  std::string repaired;
  std::vector<flat_field> flat;
  std::uint64_t record = 0;
  for_each_line(ctx, name, src, [&](std::string_view line, std::uint64_t n) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) return true;
    const std::uint64_t index = record++;
    document d;
    d.source = name;
    d.record = index;
    d.line = n;
    if (parse_flat_object(line, flat)) {
      if (auto err = from_flat(flat, ctx.opt.jsonl_text_field, d)) {
        ctx.reject(name, n, err->reason, std::move(err->message), d.kind);
        return true;
      }
      return ctx.emit(d);
    }
    // nlohmann rejects ill-formed UTF-8 inside strings; repair first so one bad
    // byte costs a U+FFFD, not the record. (The fast path above passes the bytes
    // on as they are, and cleaning repairs and counts them.)
    if (!utf8::is_valid(line)) {
      utf8::repair(line, repaired);
      line = repaired;
    }
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      ctx.reject(name, n, reject_reason::json_parse_error, e.what());
      return true;
    }
    if (!j.is_object()) {
      ctx.reject(name, n, reject_reason::json_wrong_type,
                 "record: is " + std::string(j.type_name()) + ", expected an object");
      return true;
    }
    std::optional<type_error> err;
    if (j.contains("messages")) {
      d.kind = doc_kind::sft;
      err = to_sft(j, d);
    } else if (j.contains("chosen") || j.contains("rejected")) {
      d.kind = doc_kind::preference;
      err = to_preference(j, d);
    } else {
      err = take_string(j, ctx.opt.jsonl_text_field, "", d.text);
    }
    if (err) {
      ctx.reject(name, n, err->reason, std::move(err->message), d.kind);
      return true;
    }
    return ctx.emit(d);
  });
}

}  // namespace loom::ingest::detail
