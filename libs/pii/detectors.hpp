// The single-type scanners behind loom::pii::detector, and their validators.
// Internal to libs/pii (and its tests): each appends the spans of one type to
// `out` in text order, possibly overlapping other types' spans; detect.cpp
// resolves overlaps. All take raw bytes; none allocates unless it finds.
// Stateless functions, safe from any thread.
#pragma once

#include "libs/pii/pii.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::pii::detail {

// ASCII classes on raw bytes; any byte >= 0x80 is in none of them.
inline bool is_digit(unsigned char c) { return static_cast<unsigned char>(c - '0') < 10; }
inline bool is_upper(unsigned char c) { return static_cast<unsigned char>(c - 'A') < 26; }
inline bool is_lower(unsigned char c) { return static_cast<unsigned char>(c - 'a') < 26; }
inline bool is_alpha(unsigned char c) { return is_upper(c) || is_lower(c); }
inline bool is_alnum(unsigned char c) { return is_digit(c) || is_alpha(c); }
inline bool is_hex(unsigned char c) { return is_digit(c) || static_cast<unsigned char>((c | 0x20) - 'a') < 6; }
// Characters that continue a word: an item must not touch one on either side.
inline bool is_word(unsigned char c) { return is_alnum(c) || c == '_'; }
inline unsigned char byte_at(std::string_view t, std::size_t i) { return static_cast<unsigned char>(t[i]); }

void find_emails(std::string_view text, std::vector<span>& out);
void find_ipv4(std::string_view text, std::vector<span>& out);
void find_ipv6(std::string_view text, std::vector<span>& out);
void find_cards(std::string_view text, std::vector<span>& out);
void find_ibans(std::string_view text, std::vector<span>& out);
void find_ssns(std::string_view text, std::vector<span>& out);
// Known formats go to `known`, high-entropy tokens to `entropic` (they rank
// differently when resolving overlaps).
void find_secrets(std::string_view text, const options& o, std::vector<span>& known, std::vector<span>& entropic);
// What the phone scanner needs to know about the default region, computed once
// from libphonenumber's metadata: a national number (no '+') is only handed to
// libphonenumber when its digit count can be valid there.
struct phone_plan {
  std::string region;
  std::uint32_t national_lengths = 0;  // bit L: a national significant number of L digits is possible
  std::string national_prefix;         // trunk prefix ("1" in the US, "0" in GB), may be empty
};
// nullopt for a region libphonenumber does not know.
std::optional<phone_plan> make_phone_plan(const std::string& region);
// libphonenumber on candidate runs, skipping runs that lie inside a `claimed`
// span (sorted by start: items of higher-ranked types, which win anyway).
void find_phones(std::string_view text, const phone_plan& plan, const std::vector<span>& claimed,
                 std::vector<span>& out);

// Whether t[i] starts a group inside an IBAN-shaped sequence ("DE89 3704 |0044"):
// behind it, single-space-separated groups of four [A-Z0-9] back to an IBAN head
// ([A-Z]{2}[0-9]{2} at a word start). Card and phone scanners skip such digits,
// whether or not the IBAN's check digits hold.
bool after_iban_groups(std::string_view t, std::size_t i);

// Validators (exposed for tests and for the labelled-set generator's checks).
bool luhn_ok(std::string_view digits);                 // digits only
bool card_prefix_ok(std::string_view digits);          // known IIN range for this length
bool iban_ok(std::string_view compact);                // "DE89370400440532013000"
int iban_length(char c0, char c1);                     // registry length; 0 = unknown country
bool ssn_ok(int area, int group, int serial);
bool ipv4_ok(std::string_view s);                      // "192.168.0.1", no leading zeros
bool ipv6_ok(std::string_view s);                      // RFC 4291 section 2.2 text forms
double shannon_bits(std::string_view s);               // per character

}  // namespace loom::pii::detail
