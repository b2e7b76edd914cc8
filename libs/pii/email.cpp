// E-mail addresses: local@domain, found from each '@' (memchr) outwards.
// Local part: [A-Za-z0-9._%+-]{1,64}, no leading (stripped), trailing or double
// dot. Domain: >= 2 dot-separated labels of [A-Za-z0-9-]{1,63} not starting or
// ending with '-', <= 253 bytes, the last (TLD) alphabetic of 2-63 letters or
// "xn--..." and not a file extension ("icon@2x.png"). Not found: quoted local
// parts, IP-literal domains, non-ASCII (EAI) addresses.
#include "libs/pii/detectors.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace loom::pii::detail {
namespace {

constexpr std::size_t max_local = 64, max_label = 63, max_domain = 253;

bool is_local(unsigned char c) { return is_alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'; }
bool is_label(unsigned char c) { return is_alnum(c) || c == '-'; }

// Extensions seen after '@' in file names ("logo@2x.png") that are no TLD.
bool file_extension(std::string_view tld) {
  static constexpr std::array<std::string_view, 24> ext = {
      "png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "tif", "tiff", "css", "js",
      "ts",  "html", "htm", "php", "json", "xml", "txt", "pdf", "gz", "tgz", "yaml", "yml"};
  std::string lower(tld);
  for (auto& ch : lower) ch = static_cast<char>(ch | 0x20);
  return std::find(ext.begin(), ext.end(), lower) != ext.end();
}

bool tld_ok(std::string_view tld) {
  if (tld.size() >= 5 && (tld.substr(0, 4) == "xn--" || tld.substr(0, 4) == "XN--")) return true;
  if (tld.size() < 2) return false;
  for (unsigned char c : tld)
    if (!is_alpha(c)) return false;
  return !file_extension(tld);
}

// The domain starting at `d`: its end, or 0 when there is no valid domain.
std::size_t domain_end(std::string_view t, std::size_t d) {
  const std::size_t n = t.size();
  std::size_t i = d, labels = 0, last_start = d;
  for (;;) {
    const std::size_t s = i;
    while (i < n && is_label(byte_at(t, i)) && i - s <= max_label) ++i;
    if (i == s || i - s > max_label || t[s] == '-' || t[i - 1] == '-') return 0;
    ++labels;
    last_start = s;
    if (i + 1 < n && t[i] == '.' && is_label(byte_at(t, i + 1))) {
      ++i;
      continue;
    }
    break;
  }
  if (labels < 2 || i - d > max_domain || !tld_ok(t.substr(last_start, i - last_start))) return 0;
  if (i < n) {
    const unsigned char c = byte_at(t, i);
    if (is_word(c) || c == '@') return 0;
    // "a@b.com..x", "a@b.com.-x": a malformed domain, not a sentence end.
    if (c == '.' && i + 1 < n && (t[i + 1] == '.' || t[i + 1] == '-' || t[i + 1] == '_')) return 0;
  }
  return i;
}

}  // namespace

void find_emails(std::string_view t, std::vector<span>& out) {
  const char* base = t.data();
  const std::size_t n = t.size();
  std::size_t pos = 0;
  while (pos < n) {
    const void* p = std::memchr(base + pos, '@', n - pos);
    if (!p) break;
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(p) - base);
    pos = at + 1;
    std::size_t ls = at;
    while (ls > 0 && is_local(byte_at(t, ls - 1)) && at - ls <= max_local) --ls;
    if (at - ls > max_local) continue;                 // longer than any local part
    if (ls > 0 && t[ls - 1] == '@') continue;          // "a@b@c.com"
    while (ls < at && t[ls] == '.') ++ls;              // "...john@x.org": ellipsis, not local part
    if (ls == at || t[at - 1] == '.') continue;
    if (std::string_view(base + ls, at - ls).find("..") != std::string_view::npos) continue;
    const std::size_t end = domain_end(t, at + 1);
    if (end == 0) continue;
    out.push_back(span{pii_type::email, ls, end});
    pos = end;
  }
}

}  // namespace loom::pii::detail
