// detector: runs the enabled single-type scanners (detectors.hpp) and keeps a
// non-overlapping set of spans; redact() replaces them with placeholders.
//
// Overlaps: candidates are taken in rank order, each kept unless it overlaps
// one already kept. Rank: known-format secret < e-mail < IBAN < card < SSN <
// IPv6 < IPv4 < phone < high-entropy token; then longer first, then earlier.
// Checksummed and anchored formats outrank looser ones: an IBAN's digits are
// no card, a card or an IP is no phone, an e-mail's local part is no token.
#include "libs/pii/detectors.hpp"

#include <algorithm>
#include <map>

namespace loom::pii {
namespace {

struct type_info {
  std::string_view name, placeholder;
};
constexpr std::array<type_info, type_count> infos = {{
    {"email", "<EMAIL>"},
    {"phone", "<PHONE>"},
    {"ipv4", "<IPV4>"},
    {"ipv6", "<IPV6>"},
    {"credit_card", "<CREDIT_CARD>"},
    {"iban", "<IBAN>"},
    {"ssn", "<SSN>"},
    {"secret", "<SECRET>"},
}};

struct ranked {
  span s;
  int rank;
};

bool on(const options& o, pii_type t) { return o.enabled[static_cast<std::size_t>(t)]; }

}  // namespace

std::string_view to_string(pii_type t) { return infos[static_cast<std::size_t>(t)].name; }
std::string_view placeholder(pii_type t) { return infos[static_cast<std::size_t>(t)].placeholder; }

std::optional<pii_type> type_from_string(std::string_view name) {
  for (pii_type t : all_types)
    if (to_string(t) == name) return t;
  return std::nullopt;
}

result<detector> detector::make(options o) {
  if (o.entropy_min_length < 8 || o.entropy_bits < 0)
    return make_error(errc::invalid_argument, "entropy rule: entropy_min_length >= 8 and entropy_bits >= 0");
  std::shared_ptr<const detail::phone_plan> plan;
  if (on(o, pii_type::phone)) {
    auto p = detail::make_phone_plan(o.phone_region);
    if (!p)
      return make_error(errc::invalid_argument, "unknown phone region '" + o.phone_region +
                                                    "' (an ISO 3166 alpha-2 code libphonenumber knows, e.g. US)");
    plan = std::make_shared<const detail::phone_plan>(std::move(*p));
  }
  return detector(std::move(o), std::move(plan));
}

std::vector<span> detector::find(std::string_view text) const {
  std::vector<span> out;
  find_into(text, out);
  return out;
}

void detector::find_into(std::string_view text, std::vector<span>& out) const {
  out.clear();
  std::vector<ranked> all;
  std::vector<span> found, entropic;
  const auto take = [&](int rank) {
    for (const span& s : found) all.push_back(ranked{s, rank});
    found.clear();
  };
  if (on(opts_, pii_type::secret)) {
    detail::find_secrets(text, opts_, found, entropic);
    take(0);
  }
  if (on(opts_, pii_type::email)) {
    detail::find_emails(text, found);
    take(1);
  }
  if (on(opts_, pii_type::iban)) {
    detail::find_ibans(text, found);
    take(2);
  }
  if (on(opts_, pii_type::credit_card)) {
    detail::find_cards(text, found);
    take(3);
  }
  if (on(opts_, pii_type::ssn)) {
    detail::find_ssns(text, found);
    take(4);
  }
  if (on(opts_, pii_type::ipv6)) {
    detail::find_ipv6(text, found);
    take(5);
  }
  if (on(opts_, pii_type::ipv4)) {
    detail::find_ipv4(text, found);
    take(6);
  }
  if (phone_) {
    std::vector<span> claimed;
    claimed.reserve(all.size());
    for (const ranked& r : all) claimed.push_back(r.s);
    std::sort(claimed.begin(), claimed.end(), [](const span& a, const span& b) { return a.start < b.start; });
    detail::find_phones(text, *phone_, claimed, found);
    take(7);
  }
  found.swap(entropic);
  take(8);
  if (all.empty()) return;

  std::sort(all.begin(), all.end(), [](const ranked& a, const ranked& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    const std::size_t la = a.s.end - a.s.start, lb = b.s.end - b.s.start;
    if (la != lb) return la > lb;
    return a.s.start < b.s.start;
  });
  std::map<std::size_t, span> kept;  // by start
  for (const ranked& r : all) {
    auto next = kept.lower_bound(r.s.start);
    if (next != kept.end() && next->first < r.s.end) continue;
    if (next != kept.begin() && std::prev(next)->second.end > r.s.start) continue;
    kept.emplace(r.s.start, r.s);
  }
  out.reserve(kept.size());
  for (const auto& [start, s] : kept) out.push_back(s);
}

redaction redact(std::string_view text, std::span<const span> spans) {
  redaction r;
  r.text.reserve(text.size());
  std::size_t pos = 0;
  for (const span& s : spans) {
    r.text.append(text.data() + pos, s.start - pos);
    r.text += placeholder(s.type);
    ++r.counts[static_cast<std::size_t>(s.type)];
    pos = s.end;
  }
  r.text.append(text.data() + pos, text.size() - pos);
  return r;
}

redaction redact(const detector& d, std::string_view text) {
  const auto spans = d.find(text);
  return redact(text, spans);
}

}  // namespace loom::pii
