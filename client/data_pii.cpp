// `loom data pii FILE [--json] [--region CC]`: the PII and secret spans in a
// file's raw bytes (libs/pii), offline: no service, no data dir needed.
//   --json   one line: [{"type":"email","start":12,"end":30},...] (byte offsets,
//            end exclusive; types email, phone, ipv4, ipv6, credit_card, iban,
//            ssn, secret), sorted by start, non-overlapping
//   default  a table of type, offsets and a masked preview, then counts per type
//   --region default region for phone numbers without "+country code" (US)
// The table never prints a found value whole: only its first and last two bytes.
// Files over 256 MiB are refused (exit 1) rather than held whole.
// Exit codes: 0 ok (with or without findings), 1 unreadable or too large file, 2 usage.
#include "client/cli.hpp"

#include "client/input.hpp"
#include "libs/pii/pii.hpp"

#include <cstdio>
#include <string>

namespace loom::cli {
namespace {

// The input is held whole (spans may be any length: a private key block, a
// JWT), so it is capped: past this, split the file.
constexpr std::uint64_t max_input_bytes = std::uint64_t{256} << 20;

std::string masked(std::string_view v) {
  if (v.size() < 8) return std::string(v.size(), '*');
  return printable(v.substr(0, 2)) + "..." + printable(v.substr(v.size() - 2));
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
  out += std::to_string(spans.size()) + (spans.size() == 1 ? " span" : " spans") + " in " + printable(path) + " (" +
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
  if (c.a.positional.size() != 3) return usage(usage_line(*c.a.command));
  const std::string path = c.a.positional[2];

  pii::options o;
  if (auto r = c.a.get("region")) o.phone_region = *r;
  auto d = pii::detector::make(o);
  if (!d) return usage("loom data pii: " + printable(d.err().message) + "\n" + usage_line(*c.a.command));
  auto data = read_capped(path, max_input_bytes, "`loom data pii`");
  if (!data) {
    (void)fail(c, data.err());
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
