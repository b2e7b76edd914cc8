// loom::pii: finds personal data and secrets in raw bytes and redacts them.
// Types: e-mail, phone (libphonenumber), IPv4, IPv6, credit card (Luhn + IIN),
// IBAN (mod 97), US SSN, secret (known key prefixes, private keys, JWTs and
// high-entropy tokens). Spans are byte offsets into the input, which need not
// be valid UTF-8: detectors look at ASCII only, any other byte is a boundary.
//
// Ownership and threads: a detector is immutable after make(); find() is const
// and safe from any number of threads at once. Free functions are stateless.
#pragma once

#include "libs/status/status.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::pii {

namespace detail {
struct phone_plan;
}

enum class pii_type : std::uint8_t { email, phone, ipv4, ipv6, credit_card, iban, ssn, secret };
inline constexpr std::size_t type_count = 8;
inline constexpr std::array<pii_type, type_count> all_types = {
    pii_type::email, pii_type::phone,       pii_type::ipv4, pii_type::ipv6,
    pii_type::credit_card, pii_type::iban, pii_type::ssn,  pii_type::secret};

// "email", "phone", "ipv4", "ipv6", "credit_card", "iban", "ssn", "secret".
std::string_view to_string(pii_type t);
std::optional<pii_type> type_from_string(std::string_view name);
// "<EMAIL>", "<PHONE>", ..., "<CREDIT_CARD>", ..., "<SECRET>".
std::string_view placeholder(pii_type t);

// Bytes [start, end) of the input hold one item of `type`.
struct span {
  pii_type type = pii_type::email;
  std::size_t start = 0, end = 0;
  friend bool operator==(const span&, const span&) = default;
};

struct options {
  // Region for numbers written without "+country code" (ISO 3166 alpha-2, as
  // libphonenumber knows them). International numbers are found for any region.
  std::string phone_region = "US";
  // Types to look for; all by default.
  std::array<bool, type_count> enabled = {true, true, true, true, true, true, true, true};
  // High-entropy token rule of the secret detector (see secret.cpp): a token
  // of at least `entropy_min_length` characters needs this many bits of
  // Shannon entropy per character. 4.0: a random base62 key has a median of
  // 4.25 at 24 characters and 4.77 at 40; words and identifiers 3.5-4.0.
  std::size_t entropy_min_length = 24;
  double entropy_bits = 4.0;
};

// Per-type counts, indexed by pii_type.
using type_counts = std::array<std::uint64_t, type_count>;

class detector {
 public:
  // invalid_argument for a phone region libphonenumber does not know.
  static result<detector> make(options o = {});

  // Every item in `text`: sorted by start, never overlapping. Where detectors
  // disagree, one span wins by a fixed order (see detect.cpp): known-format
  // secret, e-mail, IBAN, card, SSN, IPv6, IPv4, phone, high-entropy token;
  // within a type the longer span, then the earlier one.
  std::vector<span> find(std::string_view text) const;
  // Same, replacing the contents of `out` (reuses its capacity).
  void find_into(std::string_view text, std::vector<span>& out) const;

  const options& opts() const { return opts_; }

 private:
  detector(options o, std::shared_ptr<const detail::phone_plan> p) : opts_(std::move(o)), phone_(std::move(p)) {}
  options opts_;
  std::shared_ptr<const detail::phone_plan> phone_;  // null when phones are off
};

struct redaction {
  std::string text;    // input with every span replaced by its placeholder
  type_counts counts{};  // spans replaced, per type
};

// REQUIRES: spans sorted by start, non-overlapping, within text (as find() gives).
redaction redact(std::string_view text, std::span<const span> spans);

// Convenience: find with `d`, then redact.
redaction redact(const detector& d, std::string_view text);

}  // namespace loom::pii
