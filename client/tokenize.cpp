// `loom tokenize`: GPT-2 token ids of a file, and text back from ids. Local
// only: needs the vocabulary (scripts/install-vocab), no running service.
//   loom tokenize [--encoding gpt2] [--field F] PATH
//       one line of space-separated ids per document: a plain file is one
//       document; a .jsonl file (or any file with --field) one per record,
//       from its string field F ("text" by default).
//   loom tokenize --decode PATH [--field F]
//       each line of ids is one document. One line: the document's bytes exactly
//       (inverse of a plain file). Several lines: one document per line; with
//       --field, one JSONL record {"F": text} per line.
// The input is held whole (a plain file is one document): at most 256 MiB.
// Exit codes: 0 ok, 1 missing vocabulary / unreadable, too large or malformed file, 2 usage.
#include "client/cli.hpp"

#include "client/input.hpp"
#include "libs/tokenizer/bpe.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <string>
#include <vector>

namespace loom::cli {
namespace {

constexpr std::size_t flush_bytes = 1 << 20;  // stdout writes in ~1 MB blocks
// A plain file is one document, encoded whole; ids take ~4x its bytes in memory.
constexpr std::uint64_t max_input_bytes = std::uint64_t{256} << 20;

// File and vocabulary problems exit 1 whatever their errc (a permission error
// reading the input is not the "access denied" of exit code 3).
int input_error(const context& c, const error& e) {
  (void)fail(c, e);
  return error_exit;
}

bool flush(std::string& out) {
  const bool ok = std::fwrite(out.data(), 1, out.size(), stdout) == out.size();
  out.clear();
  return ok;
}

// Lines of `data` without their '\n' (and a '\r' before it); no empty last line.
std::vector<std::string_view> lines_of(std::string_view data) {
  std::vector<std::string_view> out;
  for (std::size_t pos = 0; pos < data.size();) {
    std::size_t e = data.find('\n', pos);
    if (e == std::string_view::npos) e = data.size();
    std::string_view l = data.substr(pos, e - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    out.push_back(l);
    pos = e + 1;
  }
  return out;
}

result<std::vector<std::string>> jsonl_texts(std::string_view data, const std::string& path, const std::string& field) {
  std::vector<std::string> docs;
  std::size_t line_no = 0;
  for (std::string_view line : lines_of(data)) {
    ++line_no;
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      return make_error(errc::invalid_argument, where + ": not JSON: " + e.what());
    }
    if (!j.is_object() || !j.contains(field) || !j[field].is_string())
      return make_error(errc::invalid_argument, where + ": no string field \"" + field + "\"");
    docs.push_back(j[field].get<std::string>());
  }
  return docs;
}

int encode_file(const context& c, const tokenizer::bpe& b, const std::string& path, const std::string& data) {
  const auto field = c.a.get("field");
  std::vector<std::string> jsonl;
  std::vector<std::string_view> docs;
  if (field || path.ends_with(".jsonl")) {
    auto t = jsonl_texts(data, path, field.value_or("text"));
    if (!t) return input_error(c, t.err());
    jsonl = std::move(*t);
    docs.assign(jsonl.begin(), jsonl.end());
  } else {
    docs.push_back(data);
  }
  std::vector<std::uint32_t> ids;
  std::string out;
  bool ok = true;
  for (std::string_view d : docs) {
    ids.clear();
    b.encode_into(d, ids);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      char buf[16];
      if (i) out += ' ';
      out.append(buf, std::to_chars(buf, buf + sizeof buf, ids[i]).ptr);
    }
    out += '\n';
    if (out.size() >= flush_bytes) ok &= flush(out);
  }
  ok &= flush(out);
  if (!ok || std::fflush(stdout) != 0) return input_error(c, make_error(errc::internal, "writing to stdout failed"));
  return ok_exit;
}

int decode_file(const context& c, const tokenizer::bpe& b, const std::string& path, const std::string& data) {
  const auto field = c.a.get("field");
  const auto lines = lines_of(data);
  std::vector<std::uint32_t> ids;
  std::string out, doc;
  bool ok = true;
  for (std::size_t n = 0; n < lines.size(); ++n) {
    ids.clear();
    const std::string_view l = lines[n];
    for (std::size_t pos = l.find_first_not_of(" \t"); pos != std::string_view::npos;
         pos = l.find_first_not_of(" \t", pos)) {
      std::uint32_t id = 0;
      const auto r = std::from_chars(l.data() + pos, l.data() + l.size(), id);
      const std::size_t end = static_cast<std::size_t>(r.ptr - l.data());
      if (r.ec != std::errc() || (end < l.size() && l[end] != ' ' && l[end] != '\t') || !b.valid_id(id)) {
        const std::size_t stop = std::min(l.find_first_of(" \t", pos), l.size());
        return input_error(c, make_error(errc::invalid_argument, path + ":" + std::to_string(n + 1) +
                                                                     ": not a GPT-2 token id: '" +
                                                                     std::string(l.substr(pos, stop - pos)) + "'"));
      }
      ids.push_back(id);
      pos = end;
    }
    doc.clear();
    b.decode_into(ids, doc);
    if (field) {
      out += json_text(nlohmann::json{{*field, doc}});
      out += '\n';
    } else {
      out += doc;
      if (lines.size() > 1) out += '\n';
    }
    if (out.size() >= flush_bytes) ok &= flush(out);
  }
  ok &= flush(out);
  if (!ok || std::fflush(stdout) != 0) return input_error(c, make_error(errc::internal, "writing to stdout failed"));
  return ok_exit;
}

}  // namespace

int cmd_tokenize(context& c) {
  // --encoding is gpt2 or absent (the table's choice).
  const bool decode = c.a.flag("decode");
  if (c.a.positional.size() != 2) return usage(usage_line(*c.a.command));
  const std::string path = c.a.positional[1];

  auto data = read_capped(path, max_input_bytes, "`loom tokenize`");
  if (!data) return input_error(c, data.err());
  auto b = tokenizer::bpe::load_gpt2();
  if (!b) return input_error(c, b.err());
  return decode ? decode_file(c, *b, path, *data) : encode_file(c, *b, path, *data);
}

}  // namespace loom::cli
