// Spool files that never outlive their process (the aggregator's streamed
// delta pieces, issue 32 item 3): sealed under a random AES-256-GCM key that
// lives only in this object's memory. Nothing such a file holds can be read
// once the process is gone (the key went with it), and there is no key file
// to keep, rotate or lose. A file is a run of records, each
//   u32 plaintext length | 12-byte random nonce | ciphertext | 16-byte GCM tag
// (big-endian length), its AAD = the spool's label and the record's index, so
// a record moved, dropped, repeated or taken from another spool fails.
// Thread-safe (const methods, a fresh cipher context per call).
#pragma once

#include "libs/status/status.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::atrest {

class ephemeral_key {
 public:
  static constexpr std::size_t overhead = 4 + 12 + 16;  // bytes a record adds to its plaintext
  explicit ephemeral_key(std::string label);             // a fresh key from the OS CSPRNG
  ~ephemeral_key();                                       // wipes it
  ephemeral_key(const ephemeral_key&) = delete;
  ephemeral_key& operator=(const ephemeral_key&) = delete;

  // Record number `index` of a file holding `plain`.
  std::string seal(std::string_view plain, std::uint64_t index) const;
  // The same into `out` (replaced; its capacity reused across pieces).
  void seal_into(std::string_view plain, std::uint64_t index, std::string& out) const;
  // The plaintexts of records 0, 1, ... back to back. corruption naming
  // `what` and the record (its index and offset) when one is cut short or
  // does not authenticate.
  result<std::string> open_all(std::string_view records, const std::string& what) const;
  // The same in the records' own buffer (no second copy of a large spool):
  // on success `records` holds the plaintexts; on failure its contents are
  // unspecified.
  status open_in_place(std::string& records, const std::string& what) const;
  // One record, number `index`, that is all of `record`, into `out` (replaced).
  status open_one(std::string_view record, std::uint64_t index, const std::string& what, std::string& out) const;

 private:
  std::string label_;
  std::array<std::uint8_t, 32> key_{};
};

}  // namespace loom::atrest
