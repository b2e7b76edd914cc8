// Generators of PII values and their near misses for the labelled set. Check
// digits (Luhn, IBAN mod 97) are computed here, not by libs/pii, so the set
// checks the detectors rather than echoing them. Phones come from
// libphonenumber. One generator per seed; not thread-safe.
#pragma once

#include "libs/pii/pii.hpp"

#include <cstdint>
#include <random>
#include <string>

namespace loom::pii::test {

struct value {
  std::string text;
  std::string kind;
};

class value_generator {
 public:
  explicit value_generator(std::uint64_t seed) : rng_(seed) {}

  value make(pii_type t);       // a valid item of type t
  value near_miss(pii_type t);  // looks like type t, is not one (nor any other type)

  std::uint64_t next() { return rng_(); }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }

 private:
  std::string chars(std::string_view alphabet, std::size_t n);
  std::string digits(std::size_t n) { return chars("0123456789", n); }

  value email();
  value phone();
  value ipv4();
  value ipv6();
  value card();
  value iban();
  value ssn();
  value secret();

  value bad_email();
  value bad_phone();
  value bad_ipv4();
  value bad_ipv6();
  value bad_card();
  value bad_iban();
  value bad_ssn();
  value bad_secret();

  std::mt19937_64 rng_;
};

// Independent reference checks used by the generator.
bool reference_luhn(const std::string& digits);
int reference_iban_mod97(const std::string& compact);  // 1 for a valid IBAN

}  // namespace loom::pii::test
