// `loom data pii FILE [--json] [--region CC]`: the PII and secret spans in a
// file's raw bytes (libs/pii), offline: no service, no data dir needed.
//   --json   one line: [{"type":"email","start":12,"end":30},...] (byte offsets,
//            end exclusive; types email, phone, ipv4, ipv6, credit_card, iban,
//            ssn, secret), sorted by start, non-overlapping
//   default  a table of type, offsets and a masked preview, then counts per type
//   --region default region for phone numbers without "+country code" (US)
// The table never prints a found value whole: only its first and last two bytes.
// Exit codes: 0 ok (with or without findings), 1 unreadable file, 2 usage.
#include "client/cli.hpp"

#include "libs/files/files.hpp"
#include "libs/pii/pii.hpp"

#include <cstdio>
#include <set>
#include <string>

namespace loom::cli {
namespace {

const char* usage_line = "usage: loom data pii FILE [--json] [--region CC]";

// Printable ASCII as is, anything else as \xNN.
std::string escaped(std::string_view s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch >= 0x20 && ch < 0x7f) {
      out += static_cast<char>(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    }
  }
  return out;
}

std::string masked(std::string_view v) {
  if (v.size() < 8) return std::string(v.size(), '*');
  return escaped(v.substr(0, 2)) + "..." + escaped(v.substr(v.size() - 2));
}

std::string as_json(const std::vector<pii::span>& spans) {
  std::string out = "[";
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (i) out += ',';
    out += "{\"type\":\"" + std::string(pii::to_string(spans[i].type)) + "\",\"start\":" +
           std::to_string(spans[i].start) + ",\"end\":" + std::to_string(spans[i].end) + "}";
  }
  return out + "]\n";
}

std::string as_table(const std::string& path, std::string_view data, const std::vector<pii::span>& spans) {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%-12s %12s %12s  %s\n", "TYPE", "START", "END", "PREVIEW");
  out += line;
  pii::type_counts counts{};
  for (const auto& s : spans) {
    ++counts[static_cast<std::size_t>(s.type)];
    std::snprintf(line, sizeof line, "%-12s %12zu %12zu  %s\n", std::string(pii::to_string(s.type)).c_str(), s.start,
                  s.end, masked(data.substr(s.start, s.end - s.start)).c_str());
    out += line;
  }
  out += std::to_string(spans.size()) + (spans.size() == 1 ? " span" : " spans") + " in " + path + " (" +
         std::to_string(data.size()) + " bytes)";
  const char* sep = ": ";
  for (pii::pii_type t : pii::all_types)
    if (const auto n = counts[static_cast<std::size_t>(t)]; n > 0) {
      out += sep + std::string(pii::to_string(t)) + " " + std::to_string(n);
      sep = ", ";
    }
  return out + "\n";
}

}  // namespace

int cmd_data_pii(context& c) {
  static const std::set<std::string> allowed = {"region", "data-dir"};
  for (const auto& [name, value] : c.a.options)
    if (!allowed.count(name)) return usage("loom data pii: unknown option --" + name + "\n" + usage_line);
  if (c.a.positional.size() != 3) return usage("loom data pii: expected one FILE\n" + std::string(usage_line));
  const std::string path = c.a.positional[2];

  pii::options o;
  if (auto r = c.a.get("region")) o.phone_region = *r;
  auto d = pii::detector::make(o);
  if (!d) return usage("loom data pii: " + d.err().message + "\n" + usage_line);
  auto data = files::read_file(path);
  if (!data) {
    (void)fail(c, make_error(data.code(), "cannot read " + path + ": " + data.err().message));
    return error_exit;  // a file problem, whatever its errc (as `loom tokenize`)
  }
  const auto spans = d->find(*data);
  const std::string out = c.json ? as_json(spans) : as_table(path, *data, spans);
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    (void)fail(c, make_error(errc::internal, "writing to stdout failed"));
    return error_exit;
  }
  return ok_exit;
}

}  // namespace loom::cli
